package file

// Temporary until the reader's container.go lands; deleted on that merge.

type Version struct{ Major, Minor uint16 }

var (
	V2_0 = Version{0, 3}
	V2_1 = Version{2, 1}
)
