# A row-wise UDF over NDJSON: for each row, "loud" is body upper-cased
# with the SUFFIX environment variable appended, and "n" its length. It
# counts the rows it was given on stderr; a body "boom" makes it exit.
import json, os, sys

SUFFIX = os.environ.get("SUFFIX", "")
seen = 0
for line in sys.stdin:
    row = json.loads(line)
    if row.get("__end"):
        sys.stderr.write("batch of %d rows\n" % seen)
        sys.stderr.flush()
        seen = 0
        print('{"__end": true}', flush=True)
        continue
    seen += 1
    body = row.get("body", row.get("chunk"))
    if body == "boom":
        sys.exit(3)
    if body is None:
        print(json.dumps({"__row": row["__row"], "loud": None, "n": None}))
    else:
        print(json.dumps({"__row": row["__row"], "loud": body.upper() + SUFFIX, "n": len(body)}))
