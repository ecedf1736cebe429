package index

// SkipMoveGuard lets a test switch the move check of definition commits
// off, to show what it guards.
func SkipMoveGuard(skip bool) { skipMoveGuard = skip }

// BeforeDefCommit sets a function an extension runs between its build and
// its definition commit (nil: none).
func BeforeDefCommit(f func()) { beforeDefCommit = f }
