// Package chunker cuts text into chunks for the chunker view kind, a 1:N view
// in which each source row's text becomes one output row per chunk.
//
// A [Spec] arrives as JSON and is decoded by [Parse], which rejects unknown
// fields and reports every problem as a [*FieldError] naming the offending
// JSON field ("udtf" when the document itself is not valid JSON). [New] builds
// a [Chunker] from a valid Spec; a Chunker holds no per-call state and may be
// shared by any number of goroutines.
//
// Sizes are measured in units: "chars" counts Unicode code points (an invalid
// UTF-8 byte counts as one code point and is passed through unchanged), and
// "words" counts maximal runs of non-space characters (unicode.IsSpace).
//
// Guarantees, for every strategy:
//   - empty text yields no chunks, and no chunk is the empty string;
//   - no chunk is longer than ChunkSize units;
//   - chunks come out in the order of the text they cover.
//
// Strategies:
//   - "fixed" cuts at unit positions 0, size-overlap, 2*(size-overlap), ...
//     and stops after the first chunk that reaches the end of the text. With
//     chars each chunk is the exact substring of the input, so with overlap 0
//     the chunks concatenate back to the input. With words each chunk is its
//     words joined by one ASCII space. Chunks are not trimmed.
//   - "recursive" splits on the first separator (default "\n\n", "\n", ". ",
//     " ") that occurs, re-splits any piece that is still too long with the
//     later separators, and cuts at fixed positions when none is left. Pieces
//     keep the separator that ended them, and adjacent pieces are merged
//     greedily into chunks, carrying trailing pieces totalling at most
//     ChunkOverlap units into the next chunk.
//   - "sentence" splits after '.', '!' or '?' followed by white space or the
//     end of the text, and at blank lines, then packs whole sentences into
//     chunks; the overlap carries whole trailing sentences. A sentence longer
//     than ChunkSize is cut at fixed positions.
//
// Recursive and sentence chunks are substrings of the input (the original
// white space between the pieces is kept) trimmed of surrounding white space;
// chunks that trim to nothing are dropped. With overlap 0 they cover every
// non-space character of the input exactly once, in order.
package chunker
