# An NDJSON UDF that first writes the environment it got to the file named
# by its first argument, then answers {"__row": n, "words": 0} per row.
env > "$1.tmp" && mv "$1.tmp" "$1"
while IFS= read -r line; do
  case "$line" in
    *'"__end"'*) printf '{"__end": true}\n' ;;
    *) n=$(printf '%s' "$line" | sed 's/.*"__row": *\([0-9][0-9]*\).*/\1/')
       printf '{"__row": %s, "words": 0}\n' "$n" ;;
  esac
done
