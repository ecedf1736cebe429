package arrowjson

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// checkedMem returns an allocator that fails the test if anything allocated
// from it is still held when the test ends.
func checkedMem(t testing.TB) *memory.CheckedAllocator {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

func nf(name string, dt arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: dt, Nullable: true}
}

func reqf(name string, dt arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: dt, Nullable: false}
}

func sch(fields ...arrow.Field) *arrow.Schema { return arrow.NewSchema(fields, nil) }

// toJSON renders records with WriteRecords.
func toJSON(t testing.TB, recs ...arrow.RecordBatch) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteRecords(&buf, recs); err != nil {
		t.Fatalf("WriteRecords: %v", err)
	}
	return buf.String()
}

// wantRowError checks that err is a *RowError with the given row and field
// and a message containing msg.
func wantRowError(t testing.TB, err error, row int, field, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want RowError{Row:%d Field:%q ~%q}", row, field, msg)
	}
	var re *RowError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not a *RowError", err, err)
	}
	if re.Row != row || re.Field != field || !strings.Contains(re.Message, msg) {
		t.Fatalf("got RowError{Row:%d Field:%q Message:%q}, want Row:%d Field:%q message containing %q",
			re.Row, re.Field, re.Message, row, field, msg)
	}
}
