# A UDF that behaves like wordcount until the input row's text says
# otherwise: "crash" exits, "hang" sleeps, "garbage" prints a non-JSON line,
# "stderr" writes to stderr, "env" answers the MVQ_TEST_SECRET it sees.
import json, os, sys, time

for line in sys.stdin:
    row = json.loads(line)
    if row.get("__end"):
        print('{"__end": true}', flush=True)
        continue
    text = row.get("text") or ""
    if text == "crash":
        sys.exit(3)
    if text == "hang":
        time.sleep(3600)
    if text == "garbage":
        print("this is not json", flush=True)
        continue
    if text == "stderr":
        print("a warning from the udf", file=sys.stderr, flush=True)
    out = {"__row": row["__row"], "words": len(text.split())}
    if text == "env":
        out["label"] = os.environ.get("MVQ_TEST_SECRET", "<unset>") + "|" + os.environ.get("WORDCOUNT_LABEL", "")
    print(json.dumps(out))
