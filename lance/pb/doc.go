// Package pb holds the Go code generated from the Lance protobuf
// definitions in lance/proto (copied from the public Lance repository,
// Apache-2.0). The generated code is committed so that builds need no
// generator; `make proto` (lance/proto/gen.sh) regenerates it.
//
//   - tablepb: table.proto, rowids.proto, transaction.proto (lance.table)
//   - filepb: file.proto (lance.file)
//   - file2pb: file2.proto (lance.file.v2)
//   - enc20pb: encodings_v2_0.proto (lance.encodings)
//   - enc21pb: encodings_v2_1.proto (lance.encodings21)
//   - indexpb: index.proto (lance.index.pb)
package pb
