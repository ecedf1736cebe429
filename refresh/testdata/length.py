# A row-wise UDF over NDJSON, the cheapest useful one: "n" is the length
# of "body". It measures the exec runtime's own cost per row.
import json, sys

out = sys.stdout
for line in sys.stdin:
    row = json.loads(line)
    if row.get("__end"):
        out.write('{"__end": true}\n')
        out.flush()
        continue
    body = row.get("body")
    out.write(json.dumps({"__row": row["__row"], "n": None if body is None else len(body)}) + "\n")
