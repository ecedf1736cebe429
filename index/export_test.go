package index

// SkipMoveGuard lets a test switch the move check of definition commits
// off, to show what it guards.
func SkipMoveGuard(skip bool) { skipMoveGuard = skip }
