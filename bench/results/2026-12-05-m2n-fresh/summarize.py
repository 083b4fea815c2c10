import json,glob,statistics,re,sys
# summarize.py [SCENARIO]: M2 against SCENARIO (default M2N) from run.sh's reports under target/<scenario>-fresh/.
other=sys.argv[1] if len(sys.argv)>1 else 'M2N'
rows=[]
for r in sorted(glob.glob(f'target/{other.lower()}-fresh/run-*/report.json'), key=lambda p:int(re.search(r'run-(\d+)',p).group(1))):
    d=json.load(open(r))
    for pos,x in enumerate(d['results']):
        rows.append((r.split('/')[0], pos+1, x['scenario'], x['latency']['p50_ms'], x['latency']['p99_ms'], x['process']['cpu_seconds'], x['update_rtt']['p50_ms'], x['control_plane_cpu_s']['kube-apiserver'], x['actions']['missed'] if 'actions' in x else None))
for row in rows: print(*[round(v,2) if isinstance(v,float) else v for v in row])
for sc in ['M2',other]:
    xs=[r for r in rows if r[2]==sc]
    print(sc, 'n',len(xs),'p99 median',round(statistics.median([r[4] for r in xs]),1),'p50 median',round(statistics.median([r[3] for r in xs]),1),'cpu median',round(statistics.median([r[5] for r in xs]),2))
for pos in [1,2]:
    xs=[r for r in rows if r[1]==pos]
    print('position',pos,'p99 median',round(statistics.median([r[4] for r in xs]),1),'apiserver cpu median',round(statistics.median([r[7] for r in xs]),1))
