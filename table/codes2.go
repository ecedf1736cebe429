package table

// The spec's codes for indexes, tags and branches.
const (
	CodeTableIndexNotFound       Code = 6
	CodeTableIndexAlreadyExists  Code = 7
	CodeTableTagNotFound         Code = 8
	CodeTableTagAlreadyExists    Code = 9
	CodeTableBranchNotFound      Code = 22
	CodeTableBranchAlreadyExists Code = 23
)
