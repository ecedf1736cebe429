#!/usr/bin/env python3
"""A row-wise mvq UDF over NDJSON, standard library only.

mvq starts this once per pool slot and keeps it running. For each batch it
writes one JSON object per input row, {"__row": n, <input columns>}, then
{"__end": true}; this answers {"__row": n, "words": <count>, "label": ...}
per row, then {"__end": true}. "words" counts the words of every text input
column; "label" is the WORDCOUNT_LABEL environment variable (set it in the
manifest's env_vars; the runtime must list it in allowed_env), empty when
unset.
"""
import json
import os
import sys

LABEL = os.environ.get("WORDCOUNT_LABEL", "")


def main():
    out = sys.stdout
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        row = json.loads(line)
        if row.get("__end"):
            out.write('{"__end": true}\n')
            out.flush()
            continue
        words = 0
        for key, value in row.items():
            if key != "__row" and isinstance(value, str):
                words += len(value.split())
        out.write(json.dumps({"__row": row["__row"], "words": words, "label": LABEL}) + "\n")


if __name__ == "__main__":
    main()
