#!/bin/sh
# First start of the compose stack: writes the API's tokens file into the
# tokens volume (MVQ_TOKENS_DIR, /etc/mvq in the container). No token is
# committed anywhere: the admin token is 32 random bytes made here, or
# MVQ_ADMIN_TOKEN when the operator gives one (at least 32 characters).
# tokens.yaml holds only its SHA-256; a generated token is left in
# admin-token (mode 0600) for the operator to read:
#
#   docker compose exec api cat /etc/mvq/admin-token
#
# A later start keeps the existing file (the API reloads it when it
# changes; edit it in the volume to add principals), unless
# MVQ_ADMIN_TOKEN is set, which always rewrites it with that token.
set -eu
dir=${MVQ_TOKENS_DIR:-/etc/mvq}
owner=${MVQ_TOKENS_OWNER:-}
umask 077
mkdir -p "$dir"
if [ -n "${MVQ_ADMIN_TOKEN:-}" ]; then
	token=$MVQ_ADMIN_TOKEN
	if [ "${#token}" -lt 32 ]; then
		echo "init-tokens: MVQ_ADMIN_TOKEN is shorter than 32 characters" >&2
		exit 1
	fi
	rm -f "$dir/admin-token"
elif [ -s "$dir/tokens.yaml" ]; then
	echo "init-tokens: $dir/tokens.yaml exists; kept"
	exit 0
else
	token=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
	printf '%s\n' "$token" >"$dir/admin-token.tmp"
	mv "$dir/admin-token.tmp" "$dir/admin-token"
fi
sum=$(printf %s "$token" | sha256sum | cut -d' ' -f1)
cat >"$dir/tokens.yaml.tmp" <<YAML
# Written by init-tokens.sh at first start. Add principals here; the API
# reloads this file when it changes.
tokens:
  - token_sha256: "$sum"
    principal: admin
    grants:
      - namespace: "*"
        actions: [read, write, refresh, admin]
YAML
if [ -n "$owner" ]; then
	chown "$owner" "$dir" "$dir/tokens.yaml.tmp"
	[ ! -e "$dir/admin-token" ] || chown "$owner" "$dir/admin-token"
fi
mv "$dir/tokens.yaml.tmp" "$dir/tokens.yaml"
echo "init-tokens: wrote $dir/tokens.yaml"
