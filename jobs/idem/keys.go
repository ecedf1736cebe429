package idem

import (
	"crypto/sha256"
	"encoding/hex"
)

// The names of the package's Redis keys, each after the Store's prefix
// (jobs' "{mvq}:", so they share the hash tag of every mvq key):
//
//	idem:{sha256(principal NUL key)}  hash  the request's fingerprint, its
//	                                        state (pending, done) and, once
//	                                        done, the response's status,
//	                                        content type and body
//	idem-of:{sha256(principal)}       zset  the principal's index of its
//	                                        records, by creation time (ms):
//	                                        bounds how many it keeps
//
// Only store methods (idem.go) and the scripts they run (scripts.go) use
// them.

func (s *Store) indexKey(principal string) string {
	h := sha256.Sum256([]byte(principal))
	return s.prefix + "idem-of:" + hex.EncodeToString(h[:])
}

func (s *Store) recordKey(principal, key string) string {
	h := sha256.Sum256([]byte(principal + "\x00" + key))
	return s.prefix + "idem:" + hex.EncodeToString(h[:])
}
