package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table/internal/claim"
)

// Table folders move between names (rename, deregister, register) by
// copying: an object store has no rename. moveFolder copies every file
// but the manifests, then the manifests newest first (the table exists at
// the destination, whole, from the first one on), then removes the
// source's manifests (it disappears there at once) and the rest. A move
// interrupted half way leaves the table readable under the destination, and
// possibly still the source: running the same move again finishes it
// (resumeMove).

// identityDir keeps, per table identity, the identifier the table was last
// moved to, so views bound to a source by identity follow it (Resolve).
const identityDir = "_identity/"

// deregisteredDir holds deregistered table folders: outside every
// namespace, so no listing or lookup sees them, until register adopts one.
const deregisteredDir = "_deregistered/"

// moveFolder moves the table folder from (a key ending in "/") to to.
// The destination must hold no manifest unless it is the same table
// (same identity) partly moved before.
func (c *Catalog) moveFolder(ctx context.Context, from, to string) error {
	return c.moveFolderKeeping(ctx, from, to, "")
}

// moveFolderKeeping is moveFolder leaving out keep (a path relative to
// from), which it removes from the source only after every manifest: a
// batch's deregister marker hides the source until the move is done.
func (c *Catalog) moveFolderKeeping(ctx context.Context, from, to, keep string) error {
	return c.moveFolderWith(ctx, from, to, moveHooks{keep: keep})
}

// moveHooks are the options of moveFolderWith: keep as in
// moveFolderKeeping; hold, when set, is called before each copy (a move
// renews its claim there, and stops on its error); copied, when set, runs
// once the destination holds every manifest, before the source goes.
type moveHooks struct {
	keep   string
	hold   func(context.Context) error
	copied func(context.Context) error
	// sealed is when the move sealed the source (zero: unknown, as in
	// recovery); no manifest goes before SealGrace past it (seal.go).
	sealed time.Time
}

func (c *Catalog) moveFolderWith(ctx context.Context, from, to string, o moveHooks) error {
	keep := o.keep
	hold := func() error {
		if o.hold == nil {
			return nil
		}
		return o.hold(ctx)
	}
	files, err := c.wh.Walk(ctx, from)
	if err != nil {
		return err
	}
	// The move's seals (seal.go) are neither copied nor removed before
	// every other manifest of the source.
	sealed, err := c.sealFiles(ctx, files)
	if err != nil {
		return err
	}
	var manifests, lineManifests []string
	for _, f := range files {
		rel := strings.TrimPrefix(f, from)
		if keep != "" && rel == keep || sealed[f] {
			continue
		}
		if strings.HasPrefix(rel, versionsDir) {
			manifests = append(manifests, rel)
			continue
		}
		if i := strings.LastIndexByte(rel, '/'); i >= 0 && strings.HasSuffix(rel[:i+1], "/"+versionsDir) {
			if _, _, ok := ParseManifestName(rel[i+1:]); ok {
				lineManifests = append(lineManifests, rel) // a branch's
			}
		}
		if err := hold(); err != nil {
			return err
		}
		if err := c.wh.CopyObject(ctx, f, to+rel); errors.Is(err, os.ErrNotExist) && (strings.HasSuffix(rel, ".tmp") || indexFile(rel)) {
			// A writer's temporary file, renamed meanwhile; or an index
			// file removed since the walk: a definition taken back by the
			// move guard (the index package's commits check it after
			// their put), an older definition pruned, or the files of a
			// dropped or replaced build. None belongs in the destination.
			continue
		} else if errors.Is(err, os.ErrNotExist) {
			// Removed by a change the move's guard takes back (a tag
			// delete puts its tag back): the move gives way.
			return errs.Errorf(errs.CodeConcurrentModification, "%s was removed while the table was being moved; nothing was moved, try again", rel)
		} else if err != nil {
			return fmt.Errorf("move %s: %w", rel, err)
		}
	}
	// V2 names sort newest first; V1 names are ordered by version.
	sort.Slice(manifests, func(i, j int) bool {
		vi, _, _ := ParseManifestName(strings.TrimPrefix(manifests[i], versionsDir))
		vj, _, _ := ParseManifestName(strings.TrimPrefix(manifests[j], versionsDir))
		return vi > vj
	})
	for _, rel := range manifests {
		if err := hold(); err != nil {
			return err
		}
		data, err := c.wh.Read(ctx, from+rel)
		if errors.Is(err, os.ErrNotExist) {
			continue // a version deleted meanwhile
		}
		if err != nil {
			return err
		}
		if err := c.wh.PutIfNotExists(ctx, to+rel, data); err != nil && !errors.Is(err, ErrExists) {
			return fmt.Errorf("move %s: %w", rel, err)
		}
	}
	if o.copied != nil {
		if err := o.copied(ctx); err != nil {
			return err
		}
	}
	if len(sealed) > 0 {
		// A commit that listed before the seal puts within half the
		// grace: none lands after its name is free again.
		since := o.sealed
		if since.IsZero() {
			since = time.Now()
		}
		for until := since.Add(c.opts.SealGrace); time.Now().Before(until); {
			if err := hold(); err != nil { // the lease may be shorter
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(min(time.Until(until), 50*time.Millisecond)):
			}
		}
	}
	if keep != "" || len(sealed) > 0 {
		// Every manifest first, oldest first (a reader meanwhile still
		// finds the latest), then the seals (a commit racing them still
		// meets one), then their markers.
		all := append(append([]string(nil), manifests...), lineManifests...)
		for i := len(all) - 1; i >= 0; i-- {
			rel := all[i]
			if err := ignoreMissing(c.wh.Delete(ctx, from+rel)); err != nil {
				return err
			}
		}
		for _, markers := range []bool{false, true} {
			for f := range sealed {
				if strings.HasSuffix(f, sealExt) == markers {
					if err := ignoreMissing(c.wh.Delete(ctx, f)); err != nil {
						return err
					}
				}
			}
		}
	}
	if keep != "" {
		if err := ignoreMissing(c.wh.Delete(ctx, from+keep)); err != nil {
			return err
		}
	}
	if err := c.wh.DeletePrefix(ctx, from+versionsDir); err != nil {
		return err
	}
	return c.wh.DeletePrefix(ctx, from)
}

// identityRecord is the file under _identity/ naming where a table went.
type identityRecord struct {
	ID []string `json:"id"`
}

// recordIdentity notes that the table with identity uuid is now id (nil:
// it left the catalog).
func (c *Catalog) recordIdentity(ctx context.Context, uuid string, id []string) error {
	if uuid == "" {
		return nil
	}
	if id == nil {
		err := c.wh.Delete(ctx, identityDir+uuid+".json")
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	b, _ := json.Marshal(identityRecord{ID: id})
	return c.wh.Write(ctx, identityDir+uuid+".json", b)
}

// Resolve returns the table whose identity is uuid, looking first at id
// (the name it was known by): when the table there has another identity
// or none is there, and the table was renamed (or registered again
// elsewhere), the table under its new name. It answers the table at id
// (or its not-found error) when no move was recorded, so a table created
// again under a name is still found by that name.
func (c *Catalog) Resolve(ctx context.Context, id []string, uuid string) (*Table, error) {
	// A recorded move wins: while a rename removes the source folder the
	// table is whole (and its identity recorded) at the destination.
	if uuid != "" {
		if moved, err := c.movedTable(ctx, uuid); err != nil || moved != nil {
			return moved, err
		}
	}
	if len(id) == 0 {
		return nil, errs.Errorf(errs.CodeInvalidInput, "a table identifier needs a name")
	}
	// OpenTable, Load(0) and Identity in one listing, the identity cached
	// per version file (resolve_cache.go).
	t := c.handle(id)
	// The identity is read (and its errors answered) even when it is not
	// compared, as before; another identity than uuid with no move
	// recorded still answers the table at id.
	if _, err := c.latestIdentity(ctx, t); err != nil {
		return nil, err
	}
	return t, nil
}

// movedTable is the table a recorded move of identity uuid names, when it
// has that identity (nil otherwise).
func (c *Catalog) movedTable(ctx context.Context, uuid string) (*Table, error) {
	if c.wh.Missing(identityDir + uuid + ".json") {
		return nil, nil // no move recorded (the common case), told by one lstat
	}
	b, err := c.wh.Read(ctx, identityDir+uuid+".json")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec identityRecord
	if json.Unmarshal(b, &rec) != nil || len(rec.ID) == 0 {
		return nil, nil
	}
	moved, err := c.OpenTable(ctx, rec.ID)
	if errs.CodeOf(err) == errs.CodeTableNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m, err := moved.Load(ctx, 0)
	if errs.CodeOf(err) == errs.CodeTableNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if got, _ := moved.Identity(ctx, m); got != uuid {
		return nil, nil
	}
	return moved, nil
}

// RenameTable moves table id to newID (another name, possibly in another
// namespace). Views bound to the table by identity follow it (Resolve).
// Materialized views themselves are not renamed: their jobs and
// dependants know them by name.
func (c *Catalog) RenameTable(ctx context.Context, id, newID []string) error {
	if len(id) == 0 {
		return errs.Errorf(errs.CodeInvalidInput, "a table identifier needs a name")
	}
	if len(newID) == 0 {
		return errs.Errorf(errs.CodeInvalidInput, "new_table_name: required")
	}
	if JoinID(id) == JoinID(newID) {
		return errs.Errorf(errs.CodeInvalidInput, "new_table_name: the table is already called %s", JoinID(id))
	}
	// Refused before anything is written when it cannot go through.
	if _, err := c.OpenTable(ctx, id); err != nil {
		return err
	}
	if err := c.requireNamespace(ctx, newID[:len(newID)-1]); err != nil {
		return err
	}
	// Both names are claimed for the whole move (claim.go): batches over
	// either finish first, and none starts until the move is done.
	mc, err := c.claimMove(ctx, tableKey(id), tableKey(newID), newID, tableKey(id), tableKey(newID))
	if err != nil {
		return err
	}
	defer mc.Release(ctx)
	t, err := c.openSettled(ctx, id)
	if err != nil {
		return err
	}
	if err := c.requireNamespace(ctx, newID[:len(newID)-1]); err != nil {
		return err
	}
	m, err := t.Load(ctx, 0)
	if err != nil {
		return err
	}
	if err := c.guardWrite(id, m, "rename"); err != nil {
		return err
	}
	uuid, err := t.Identity(ctx, m)
	if err != nil {
		return err
	}
	if ok, err := c.tableExists(ctx, newID); err != nil {
		return err
	} else if ok {
		return errs.Errorf(errs.CodeTableAlreadyExists, "table %s already exists", JoinID(newID))
	}
	return c.claimedMove(ctx, mc, uuid)
}

// claimedMove moves the table with identity uuid as claimed by mc,
// recording where it went once the destination holds it whole (before
// the source goes, so Resolve finds it throughout).
func (c *Catalog) claimedMove(ctx context.Context, mc *claim.Move, uuid string) error {
	if err := mc.Start(ctx, uuid); err != nil {
		return err
	}
	c.step("move-started")
	// Commits take no claim: sealing the source's lines makes every
	// commit either land before the copy or fail (seal.go).
	to := mc.H.To
	if mc.H.ToID != nil {
		to = JoinID(mc.H.ToID)
	}
	if err := c.seal(ctx, mc.H.From, mc.H.ID, to); err != nil {
		return errors.Join(err, c.unseal(context.WithoutCancel(ctx), mc.H.From, mc.H.ID))
	}
	sealed := time.Now()
	c.step("move-sealed")
	err := c.moveFolderWith(ctx, mc.H.From, mc.H.To, moveHooks{
		hold:   mc.Hold,
		sealed: sealed,
		copied: func(ctx context.Context) error {
			c.step("move-copied")
			return c.recordIdentity(ctx, uuid, mc.H.ToID)
		},
	})
	if err != nil {
		// Never leave the source sealed: finish forward when the
		// destination holds the table, else unseal; when even that fails
		// the claim stays for recovery (RecoverTransactions).
		if ferr := c.finishMove(context.WithoutCancel(ctx), mc.H); ferr != nil {
			mc.Stuck = true
			return errors.Join(err, ferr)
		}
	}
	return err
}

// DeregisterTable takes table id out of the catalog and keeps its content:
// the folder moves to _deregistered/{identity}.lance/ in the warehouse,
// whose location is returned for a later register. Next to it,
// _deregistered/{identity}.origin.json names the table it was, so register
// can ask whether the caller may take it from that namespace.
func (c *Catalog) DeregisterTable(ctx context.Context, id []string) (string, error) {
	if len(id) == 0 {
		return "", errs.Errorf(errs.CodeInvalidInput, "a table identifier needs a name")
	}
	if _, err := c.OpenTable(ctx, id); err != nil {
		return "", err
	}
	mc, err := c.claimMove(ctx, tableKey(id), "", nil, tableKey(id))
	if err != nil {
		return "", err
	}
	defer mc.Release(ctx)
	t, err := c.openSettled(ctx, id)
	if err != nil {
		return "", err
	}
	m, err := t.Load(ctx, 0)
	if err != nil {
		return "", err
	}
	uuid, err := t.Identity(ctx, m)
	if err != nil {
		return "", err
	}
	dst := deregisteredDir + uuid + tableSuffix + "/"
	// Before the folder appears there: a folder without its record is
	// one only a root admin may adopt (RegisterSource).
	if err := c.recordOrigin(ctx, uuid, id); err != nil {
		return "", err
	}
	mc.H.To = dst
	if err := c.claimedMove(ctx, mc, uuid); err != nil {
		return "", err
	}
	return c.wh.Location(strings.TrimSuffix(dst, "/")), nil
}

// originExt names the record next to a deregistered folder of the table
// it was (_deregistered/{identity}.origin.json).
const originExt = ".origin.json"

// originRecord is what the record holds: the identifier the table had.
type originRecord struct {
	ID []string `json:"id"`
}

// recordOrigin notes that the folder deregistered as identity uuid was
// table id.
func (c *Catalog) recordOrigin(ctx context.Context, uuid string, id []string) error {
	b, _ := json.Marshal(originRecord{ID: id})
	return c.wh.Write(ctx, deregisteredDir+uuid+originExt, b)
}

// readOrigin returns the identifier the folder deregistered as name (its
// folder name without .lance) had; nil when no record was kept.
func (c *Catalog) readOrigin(ctx context.Context, name string) ([]string, error) {
	b, err := c.wh.Read(ctx, deregisteredDir+name+originExt)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec originRecord
	if json.Unmarshal(b, &rec) != nil || len(rec.ID) == 0 {
		return nil, nil
	}
	for _, p := range rec.ID {
		if ValidatePart(p) != nil {
			return nil, nil
		}
	}
	return rec.ID, nil
}

// RegisterSource is the folder a register would adopt, for the caller to
// judge before anything moves. Namespace is where it belongs: for a folder
// deregister left, the namespace of the table it was (Known false when no
// record says: a folder deregistered before records were kept, or written
// under _deregistered/ by another tool); for any other folder, the
// namespace it is registered into (it must lie inside it).
type RegisterSource struct {
	Location     string
	Deregistered bool
	Namespace    []string
	Known        bool
}

// registerKey checks location as a folder register may adopt as table id
// and returns its key (ending in "/") and what it is. Only two kinds of
// folder qualify: one deregister left (_deregistered/{name}.lance/, exactly),
// and a folder inside id's namespace that is neither a table's folder nor
// inside one (a branch's tree/, _refs, _indices...) nor the catalog's own
// (names starting with "_" or "."). id's own folder qualifies too (the
// table is already in place).
func (c *Catalog) registerKey(id []string, location string) (string, RegisterSource, error) {
	src := RegisterSource{Location: location}
	bad := func(format string, args ...any) (string, RegisterSource, error) {
		return "", src, errs.Errorf(errs.CodeInvalidInput, "location: %q "+format, append([]any{location}, args...)...)
	}
	key := strings.TrimPrefix(location, c.wh.Root()+"/")
	key = strings.Trim(key, "/")
	if key == "" || strings.Contains(location, "://") && key == location || strings.Contains(key, "..") || strings.HasPrefix(key, "/") {
		return bad("is not a folder inside the warehouse") // the root is not shown
	}
	key += "/"
	ns := id[:len(id)-1]
	if key == tableKey(id) {
		src.Namespace, src.Known = ns, true
		return key, src, nil
	}
	if rest, ok := strings.CutPrefix(key, deregisteredDir); ok {
		name, ok := strings.CutSuffix(rest, tableSuffix+"/")
		if !ok || name == "" || strings.ContainsAny(name, "/\\") {
			return bad("is not a folder deregister left: want %s{identity}%s", deregisteredDir, tableSuffix)
		}
		src.Deregistered = true
		return key, src, nil
	}
	parts := strings.Split(strings.TrimSuffix(key, "/"), "/")
	for i, p := range parts {
		switch {
		case p == "":
			return bad("has an empty folder name")
		case strings.HasSuffix(p, tableSuffix) && i == len(parts)-1:
			return bad("is the folder of a table of this catalog; use rename to give it another name")
		case strings.HasSuffix(p, tableSuffix):
			return bad("is inside the folder of table %s: register adopts a table's root folder, never a branch (tree/) or another part of a table", JoinID(parts[:i+1]))
		case p[0] == '_' || p[0] == '.':
			return bad("is inside %q, which holds the catalog's own files, not a table", strings.Join(parts[:i+1], "/"))
		}
	}
	if !strings.HasPrefix(key, namespaceKey(ns)) {
		where := "the namespace " + JoinID(ns)
		return bad("is outside %s, where %s is registered: register adopts only folders inside the namespace it registers into", where, JoinID(id))
	}
	src.Namespace, src.Known = ns, true
	return key, src, nil
}

// RegisterTable adopts the table folder at location (a URI or key inside
// the warehouse holding _versions/: one deregister left, or one written by
// another tool inside id's namespace; registerKey says which qualify) as
// table id. allow, when set, is asked about the folder before anything
// moves (the API checks the caller's grant on where it belongs); its error
// refuses. A folder holding tables or namespaces is refused (the move would
// carry them along), and so is one whose identity another table of the
// catalog has (adopting it would make that table's views follow this
// one). mode "create" (default) refuses an existing id; "overwrite" is
// refused: it would delete the registered table's data.
func (c *Catalog) RegisterTable(ctx context.Context, id []string, location, mode string, allow func(RegisterSource) error) (*Table, error) {
	if len(id) == 0 {
		return nil, errs.Errorf(errs.CodeInvalidInput, "a table identifier needs a name")
	}
	switch strings.ToLower(mode) {
	case "", "create":
	case "overwrite":
		return nil, errs.Errorf(errs.CodeInvalidInput, "mode: overwrite would delete the data of the table registered as %s; deregister it first", JoinID(id))
	default:
		return nil, errs.Errorf(errs.CodeInvalidInput, "mode %q: want create", mode)
	}
	key, rs, err := c.registerKey(id, location)
	if err != nil {
		return nil, err
	}
	var name string // the deregistered folder's name, its identity
	if rs.Deregistered {
		name = strings.TrimSuffix(strings.TrimPrefix(key, deregisteredDir), tableSuffix+"/")
		from, err := c.readOrigin(ctx, name)
		if err != nil {
			return nil, err
		}
		if from != nil {
			rs.Namespace, rs.Known = from[:len(from)-1], true
		}
	}
	if err := c.requireNamespace(ctx, id[:len(id)-1]); err != nil {
		return nil, err
	}
	if allow != nil {
		if err := allow(rs); err != nil {
			return nil, err
		}
	}
	src := &Table{c: c, id: id, key: key}
	vs, err := src.Versions(ctx)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, errs.Errorf(errs.CodeInvalidInput, "location: %q holds no table versions (_versions/)", location)
	}
	m, err := src.readManifest(ctx, vs[len(vs)-1])
	if err != nil {
		return nil, errs.Errorf(errs.CodeInvalidInput, "location: %v", err)
	}
	uuid, err := src.Identity(ctx, m)
	if err != nil {
		return nil, err
	}
	if rs.Deregistered && uuid != name {
		return nil, errs.Errorf(errs.CodeInvalidInput, "location: %q holds a table whose identity is not its folder's name; deregister did not leave it", location)
	}
	if err := c.checkAdoptable(ctx, key); err != nil {
		return nil, err
	}
	t := c.handle(id)
	if held, err := c.identityHeld(ctx, uuid, id); err != nil {
		return nil, err
	} else if held {
		return nil, errs.Errorf(errs.CodeTableAlreadyExists, "location: %q holds a table whose identity (%s) another table of this catalog has; a table is registered once", location, uuid)
	}
	if key == t.key {
		return t, c.recordIdentity(ctx, uuid, id) // already in place
	}
	mc, err := c.claimMove(ctx, key, t.key, id, t.key)
	if err != nil {
		return nil, err
	}
	defer mc.Release(ctx)
	if ok, err := c.tableExists(ctx, id); err != nil {
		return nil, err
	} else if ok {
		return nil, errs.Errorf(errs.CodeTableAlreadyExists, "table %s already exists", JoinID(id))
	}
	if err := c.claimedMove(ctx, mc, uuid); err != nil {
		return nil, err
	}
	if rs.Deregistered {
		// The folder is gone from _deregistered/: its record goes too.
		// The table is registered whatever happens here: a record left
		// behind names a folder that no longer exists, and the next
		// deregister of that identity writes its own.
		_ = ignoreMissing(c.wh.Delete(ctx, deregisteredDir+name+originExt))
	}
	return t, nil
}

// checkAdoptable refuses a folder that holds a table folder or a
// namespace below it: the move would carry them (and their data) along.
func (c *Catalog) checkAdoptable(ctx context.Context, key string) error {
	files, err := c.wh.Walk(ctx, key)
	if err != nil {
		return err
	}
	for _, f := range files {
		rel := strings.TrimPrefix(f, key)
		parts := strings.Split(rel, "/")
		for i, p := range parts {
			if i < len(parts)-1 && strings.HasSuffix(p, tableSuffix) || i == len(parts)-1 && p == namespaceMarker {
				return errs.Errorf(errs.CodeInvalidInput, "location: the folder holds a table or namespace (%s): register adopts one table's folder", rel)
			}
		}
	}
	return nil
}

// identityHeld reports whether a table of the catalog other than except
// has identity uuid: the one a recorded move names, or any other (every
// table's latest identity is read; register is rare).
func (c *Catalog) identityHeld(ctx context.Context, uuid string, except []string) (bool, error) {
	if moved, err := c.movedTable(ctx, uuid); err != nil {
		return false, err
	} else if moved != nil && !slices.Equal(moved.id, except) {
		return true, nil
	}
	// Identifier parts never hold a control character (ValidatePart):
	// NUL joins them unambiguously.
	names, err := c.ListAllTables(ctx, "\x00", false)
	if err != nil {
		return false, err
	}
	for _, n := range names {
		other := strings.Split(n, "\x00")
		if slices.Equal(other, except) {
			continue
		}
		got, err := c.latestIdentity(ctx, c.handle(other))
		if errs.CodeOf(err) == errs.CodeTableNotFound {
			continue // dropped meanwhile
		}
		if err != nil {
			return false, err
		}
		if got == uuid {
			return true, nil
		}
	}
	return false, nil
}

// openSettled opens table id for a move once every batch transaction that
// touches it is decided and applied (a move copies the folder: a marker
// or manifest a batch wrote meanwhile would be left behind or carried
// along undecided).
func (c *Catalog) openSettled(ctx context.Context, id []string) (*Table, error) {
	if len(id) == 0 {
		return nil, errs.Errorf(errs.CodeInvalidInput, "a table identifier needs a name")
	}
	if err := c.settleTable(ctx, c.handle(id)); err != nil {
		return nil, err
	}
	return c.OpenTable(ctx, id)
}

// IndexDir is the folder of a line's index definitions and files (the
// index package's layout: _mvq_indices/ in the table folder, or in a
// branch's folder tree/{b}/). It is not Lance's _indices/: Lance's cleanup
// (LanceDB's optimize) deletes every file there that no Lance index names.
const IndexDir = "_mvq_indices/"

// LegacyIndexDir is where mvq kept its index files before they moved out
// of Lance's way; Upgrade moves them (index_move.go).
const LegacyIndexDir = "_indices/"

// indexFile reports whether rel (relative to a table folder) is under an
// IndexDir (or Lance's index folder: a move takes both along).
func indexFile(rel string) bool {
	for _, d := range []string{IndexDir, LegacyIndexDir} {
		if strings.HasPrefix(rel, d) || strings.Contains(rel, "/"+d) {
			return true
		}
	}
	return false
}
