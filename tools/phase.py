import json,sys
d=json.load(open(sys.argv[1])); print(sys.argv[1], "wall", d["wall_s"])
for who in [d["reference"]]+d["candidates"]:
  print("  req %.2f" % who.get("request_s",0), {k: round(v,3) for k,v in who["phases_s"].items()}, [(round(w.get("verify_s",0),3), round(w.get("time_s",0),3), w.get("time",{}).get("count")) for w in who["workloads"]])
