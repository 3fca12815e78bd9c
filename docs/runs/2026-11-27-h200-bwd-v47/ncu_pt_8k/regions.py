import csv,gzip,collections,sys
steps=133120
res={}
tops={}
for name in ('v47b','v46d'):
    rows=list(csv.reader(gzip.open(f'docs/runs/2026-11-27-h200-bwd-v47/ncu_pt_8k/source_{name}.csv.gz','rt')))
    hdr=rows[1]; data=rows[2:]; ix={h:i for i,h in enumerate(hdr)}
    reasons=[h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
    by=collections.Counter(); 
    for r in data: by[int(r[ix['Instructions Executed']])]+=int(r[ix['Warp Stall Sampling (All Samples)']])
    tot=sum(by.values())
    print(name,'samples/step',tot/steps)
    for ex,s in sorted(by.items(), key=lambda x:-x[1])[:6]: print(f'   exec/step {ex/steps:.3f} samples/step {s/steps:.4f}')
    loopex=max(by, key=lambda e: by[e])
    c=collections.Counter(); items=[]
    for k,r in enumerate(data):
        if int(r[ix['Instructions Executed']])==loopex:
            for h in reasons: c[h]+=int(r[ix[h]] or 0)
            items.append((int(r[ix['Warp Stall Sampling (All Samples)']])/steps,k,r[ix['Source']].strip()[:60],data[k-1][ix['Source']].strip()[:45]))
    res[name]={h:v/steps for h,v in c.items()}; tops[name]=sorted(items,reverse=True)[:14]
a=res['v47b']; b=res['v46d']
for h in sorted(a,key=lambda h:-(a[h])):
    if a[h]>0.01 or abs(a[h]-b[h])>0.003: print(f'  {h:24s} v47b {a[h]:.4f} v46d {b[h]:.4f} diff {a[h]-b[h]:+.4f}')
for n in tops:
    print(n); 
    for t in tops[n]: print(f'  {t[0]:.4f} #{t[1]:5d} {t[2]:60s} | {t[3]}')
