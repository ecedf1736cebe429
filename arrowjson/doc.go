// Package arrowjson converts between Apache Arrow data and the JSON shapes
// used by the mvq HTTP API (Lance Namespace REST spec):
//
//   - [Schema], [Field] and [DataType] are the spec's JsonArrowSchema,
//     JsonArrowField and JsonArrowDataType; [FromArrow] and [Schema.ToArrow]
//     convert them to and from *arrow.Schema.
//   - [DecodeRows] and [InferRows] turn a JSON array of row objects into one
//     Arrow record batch, reporting bad input as a *[RowError].
//   - [WriteRows] and [WriteRecords] stream Arrow record batches out as a JSON
//     array of row objects.
//   - [DecodeIPCSchema] and [EncodeIPCSchema] read and write a schema carried
//     as a base64 Arrow IPC stream.
package arrowjson
