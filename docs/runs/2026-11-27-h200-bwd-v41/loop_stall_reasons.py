import csv, gzip, sys, collections
def load(path, count):
    rows = list(csv.reader(gzip.open(path, "rt")))
    h = next(i for i, r in enumerate(rows) if "Warp Stall Sampling (All Samples)" in r)
    hdr = rows[h]; col = {n: i for i, n in enumerate(hdr)}
    reasons = [n for n in hdr if n.startswith("stall_") and "Not Issued" not in n]
    out = []
    for r in rows[h + 1:]:
        try:
            if int(r[col["Instructions Executed"]]) != count: continue
        except (ValueError, IndexError):
            continue
        out.append((r[col["Source"]].strip(), {k: int(r[col[k]] or 0) for k in reasons}))
    return out, reasons
for path, count in (("source_bwd_fa3.csv.gz", 1064960), ("source_bwd_fa3-public.csv.gz", 1032192)):
    ins, reasons = load(path, count)
    tot = collections.Counter()
    for src, d in ins: tot.update(d)
    T = sum(tot.values())
    print("==", path, "loop samples", T)
    print("   loop totals:", ", ".join(f"{k[6:]} {100*v/T:.1f}" for k, v in tot.most_common(9)))
    # per key instruction
    for i, (src, d) in enumerate(ins):
        s = sum(d.values())
        if s > 0.015 * T:
            top = sorted(d.items(), key=lambda kv: -kv[1])[:3]
            print(f"   {i:4d} {100*s/T:4.1f}% {src[:48]:48s} " + ", ".join(f"{k[6:]} {100*v/T:.1f}" for k, v in top if v))
print()
for path, count, ranges in (("source_bwd_fa3.csv.gz", 1064960, [(0, 67), (67, 68), (68, 69), (69, 124), (124, 125), (125, 385), (385, 386), (386, 614)]),
                            ("source_bwd_fa3-public.csv.gz", 1032192, [(0, 28), (28, 30), (30, 81), (81, 82), (82, 229), (229, 230), (230, 547)])):
    ins, reasons = load(path, count)
    T = sum(sum(d.values()) for _, d in ins)
    print("==", path)
    for a, b in ranges:
        c = collections.Counter()
        for src, d in ins[a:b]: c.update(d)
        s = sum(c.values())
        print(f"   [{a:3d},{b:3d}) {100*s/T:5.1f}%  " + ", ".join(f"{k[6:]} {100*v/T:.1f}" for k, v in c.most_common(5) if v) + f"   first: {ins[a][0][:40]}")
