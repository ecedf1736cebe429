#!/bin/sh
# Regenerates the Go code for the Lance protobuf definitions in this folder
# (copied from the public Lance repository, Apache-2.0, see LICENSE).
# Needs protoc (Debian: protobuf-compiler) and protoc-gen-go
# (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12).
# Run from the repository root: make proto
set -eu
cd "$(dirname "$0")"
M="Mtable.proto=github.com/mvq-dev/mvq/lance/pb/tablepb"
M="$M,Mrowids.proto=github.com/mvq-dev/mvq/lance/pb/tablepb"
M="$M,Mtransaction.proto=github.com/mvq-dev/mvq/lance/pb/tablepb"
M="$M,Mfile.proto=github.com/mvq-dev/mvq/lance/pb/filepb"
M="$M,Mfile2.proto=github.com/mvq-dev/mvq/lance/pb/file2pb"
M="$M,Mencodings_v2_0.proto=github.com/mvq-dev/mvq/lance/pb/enc20pb"
M="$M,Mencodings_v2_1.proto=github.com/mvq-dev/mvq/lance/pb/enc21pb"
M="$M,Mindex.proto=github.com/mvq-dev/mvq/lance/pb/indexpb"
protoc -I. --go_out=.. --go_opt=module=github.com/mvq-dev/mvq/lance --go_opt="$M" \
  table.proto rowids.proto transaction.proto file.proto file2.proto \
  encodings_v2_0.proto encodings_v2_1.proto index.proto
