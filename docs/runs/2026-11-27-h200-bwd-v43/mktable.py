import json, sys
# mktable.py VARIANT: d128 causal -> <causal>, d128 non-causal from 1024 -> <noncausal>
v = sys.argv[1]
causal, noncausal = {"dq1": ("dq1_fs_causal", "dq1_rw_fs"), "ctl": ("dqh_fs_causal", "dqh_rw_fs")}[v]
src = open("/tmp/dq1/tuning_table.json.orig").read()
doc = json.loads(src)
n = 0
for e in doc["entries"]:
    m = e["match"]
    if m.get("direction") != "bwd" or m.get("head_dim") != 128: continue
    dt = m["dtype"]; P = f"fa3_bwd_{dt}_d128_m64_n128_s2_w2_"
    if m["causal"]: e["kernel"] = P + causal
    elif m["seqlen_q"][0] >= 1024: e["kernel"] = P + noncausal
    else: continue
    n += 1
    k = e["kernel"]
    e["config"] = {"block_m": 64, "block_n": 128, "stages": 2, "consumer_warpgroups": 2,
                   "producer_regs": 24, "consumer_regs": 240, "kv_split": "keys",
                   "dq_split": "one_warpgroup" if "_dq1" in k else "head_dim",
                   "rotated_walk": "_rw" in k, "first_store": "_fs" in k, "persistent": False,
                   "causal": k.endswith("_causal")}
print(n, "entries changed", file=sys.stderr)
json.dump(doc, open("src/runtime/tuning_table.json", "w"), indent=2)
