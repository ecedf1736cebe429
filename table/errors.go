package table

import "github.com/mvq-dev/mvq/errs"

// ErrConflict is wrapped by every commit that lost to a concurrent writer and
// could not be rebased.
var ErrConflict = &errs.Error{Code: errs.CodeConcurrentModification, Message: "concurrent modification"}

// IsConflict reports whether err is a commit conflict.
func IsConflict(err error) bool { return errs.CodeOf(err) == errs.CodeConcurrentModification }
