package file

// Temporary until container.go lands: the shared Version type.

// Version is a Lance file format version as the footer spells it.
type Version struct{ Major, Minor uint16 }

var (
	V2_0 = Version{0, 3}
	V2_1 = Version{2, 1}
)
