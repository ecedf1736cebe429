# A table UDF over NDJSON: one output row per word of "body", tagged with
# the TAG environment variable; a body "boom" makes it exit, "hang" makes
# it never answer.
import json, os, sys, time

TAG = os.environ.get("TAG", "")
for line in sys.stdin:
    row = json.loads(line)
    if row.get("__end"):
        print('{"__end": true}', flush=True)
        continue
    body = row.get("body") or ""
    if body == "boom":
        sys.exit(2)
    if body == "hang":
        time.sleep(3600)
    for w in body.split():
        print(json.dumps({"lang": row.get("lang"), "word": w, "tag": TAG}))
