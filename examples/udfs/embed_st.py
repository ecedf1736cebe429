#!/usr/bin/env python3
"""An embedding UDF over NDJSON with sentence-transformers.

mvq starts this once per pool slot and keeps it running. For each batch it
writes {"__row": n, <input column>: text} per row, then {"__end": true};
this answers {"__row": n, "embedding": [floats]} per row (null for a null
text), then {"__end": true}. "embedding" is the key `mvq column add`
binds the column to. The model is EMBED_MODEL (default
sentence-transformers/all-MiniLM-L6-v2, 384 dimensions; set it in the
manifest's env_vars, which the runtime must allow, and declare the
runtime's dimensions to match).
"""
import json
import os
import sys


def main():
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(
        os.environ.get("EMBED_MODEL", "sentence-transformers/all-MiniLM-L6-v2"))
    out = sys.stdout
    rows = []
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        row = json.loads(line)
        if row.get("__end"):
            texts = [t for _, t in rows if t is not None]
            vecs = iter(model.encode(texts, normalize_embeddings=True).tolist()
                        if texts else [])
            for n, t in rows:
                v = next(vecs) if t is not None else None
                out.write(json.dumps({"__row": n, "embedding": v}) + "\n")
            out.write('{"__end": true}\n')
            out.flush()
            rows = []
            continue
        texts = [v for k, v in sorted(row.items())
                 if not k.startswith("__") and v is not None]
        rows.append((row["__row"], "\n".join(map(str, texts)) if texts else None))


if __name__ == "__main__":
    main()
