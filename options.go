package iceberg

import (
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/changes"
	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/encode"
)

// Mode selects how Upsert and Delete change existing rows.
type Mode int

const (
	// MergeOnRead writes upserts and deletes as delete files next to the data (cheap writes, readers merge).
	MergeOnRead Mode = iota
	// CopyOnWrite rewrites the data files that hold affected rows (readers never see delete files).
	CopyOnWrite
)

// String returns the table property spelling of the mode.
func (m Mode) String() string {
	switch m {
	case MergeOnRead:
		return "merge-on-read"
	case CopyOnWrite:
		return "copy-on-write"
	}
	return "unknown"
}

// DeleteFiles says which kinds of delete files a merge-on-read writer may add to a table (WithDeleteFiles), for
// the readers of the table: some cannot apply equality deletes (Snowflake, Unity Catalog), some no delete files
// at all, and equality deletes cost every reader until compaction.
type DeleteFiles = commit.DeleteFiles

// The choices of DeleteFiles (see commit.DeleteFiles for each).
const (
	// AnyDeleteFiles: position deletes or deletion vectors from the key index, and equality deletes on the key
	// for a commit the index cannot cover. The default.
	AnyDeleteFiles = commit.AnyDeleteFiles
	// NoEqualityDeletes: never equality deletes; a commit the key index cannot cover rewrites the data files
	// holding its keys instead (copy-on-write).
	NoEqualityDeletes = commit.NoEqualityDeletes
	// NoEqualityDeletesOrFail: never equality deletes; Upsert and Delete return ErrEqualityDeletesRefused while
	// the key index is off, and a commit the index can no longer cover fails with it.
	NoEqualityDeletesOrFail = commit.NoEqualityDeletesOrFail
	// NoDeleteFiles: no delete files at all: every upsert and delete rewrites the data files holding its keys.
	//
	// Deprecated: use WithMode(CopyOnWrite), which does the same.
	NoDeleteFiles = commit.NoDeleteFiles
)

// Defaults of the Writer's knobs. Each option's doc comment repeats its default.
const (
	DefaultFlushRows      = 1_000_000
	DefaultFlushBytes     = 64 << 20
	DefaultFlushInterval  = time.Second
	DefaultMaxInFlight    = 2
	DefaultMemoryLimit    = 256 << 20
	DefaultTargetFileSize = 128 << 20
	DefaultMaxUncommitted = 64
	// DefaultSmallFileCompactionEvery is the commits between small-file compactions on tables the writer creates.
	DefaultSmallFileCompactionEvery = 32
	// DefaultDeleteRewriteRatio is the share of a data file's rows deleted at which a background pass rewrites it
	// (WithDeleteRewriteRatio).
	DefaultDeleteRewriteRatio = 0.3
	DefaultCommitTimeout      = 5 * time.Minute
	DefaultKeepSnapshots      = 100
	DefaultRowGroupRows       = 128 * 1024
	defaultMaxTokenBytes      = 4096
	defaultRewriteManifests   = 200
)

// Option configures a Writer. Options are applied in order; the last one wins.
type Option func(*options)

// options is what NewWriter is given, grouped by the stage each part configures.
type options struct {
	writerID string
	stableID bool
	branch   string
	logger   *slog.Logger
	shared   *sharedBudget    // a Router's budget and encode pool (router.go); nil: the writer's own
	mem      memory.Allocator // the allocator of everything the writer holds (nil: a Go allocator): tests count it

	flush  flushOptions
	files  fileOptions
	keyed  keyOptions
	maint  maintOptions
	commit commitOptions
	schema schemaOptions
}

// flushOptions are the seal policy, budgets and checkpoints: what the pipeline is configured with.
type flushOptions struct {
	rows           int
	bytes          int64
	interval       time.Duration
	maxInFlight    int
	memoryLimit    int64
	maxUncommitted int
	checkpoints    bool
	posOrder       func(partition, a, b string) (int, bool) // WithPositionOrder
}

// fileOptions are the data files' layout: what the encoder is configured with.
type fileOptions struct {
	targetFileSize int64
	rowGroupRows   int
	fanout         encode.FanoutLimits // tests only (export_test.go); zero fields: the defaults (fanout.go)
	shred          []shredOption       // WithShreddedPaths, in the order given (shredpaths.go)
}

// keyOptions are the keyed modes' settings: what the key and change stages are configured with.
type keyOptions struct {
	mode       *Mode
	keys       []string
	indexBytes int64
	// spillDir is WithKeyIndexSpillDir ("": os.TempDir()).
	spillDir       string
	deleteFiles    DeleteFiles   // WithDeleteFiles
	supersedeBatch int           // v2: superseded position delete files removed together (supersededBatch; tests lower it)
	changes        ChangeColumns // WithChangeColumns (apply.go); empty fields: their defaults
	// rowIDsAtCommit: a benchmark's baseline (export_test.go): v3 merge-on-read upserts carry row ids only by
	// the commit-time rewrite, as before encodeRowIDs.
	rowIDsAtCommit bool
}

// maintOptions are the background maintenance's schedule: what the maintainer is configured with.
type maintOptions struct {
	keepSnapshots int
	expireAge     time.Duration
	rewriteEvery  int
	autoCompact   int
	smallFiles    int     // WithSmallFileCompactionEvery; -1: default by table origin
	convertEvery  int     // WithDeleteConversionEvery
	deleteRatio   float64 // WithDeleteRewriteRatio
	orphanAge     time.Duration
	// rewriteWritten holds a background pass once it wrote its files (WithHoldRewritesForTest).
	rewriteWritten func()
}

// commitOptions are how runs are committed and reported.
type commitOptions struct {
	committer Committer
	timeout   time.Duration
	// retryWaits, when set, replaces the commit retries' backoff bounds (the first wait and the cap; see
	// backoff): tests of conflicts and lost replies shrink them so that their retries cost no wall time.
	retryWaits *[2]time.Duration
	// wrapCommitter, when set, wraps the committer the writer hands its runs to (tests observe runs with it).
	wrapCommitter func(Committer) Committer
	onCommit      func(CommitInfo)
	hooks         []Hook // WithHooks (hooks.go)
}

// schemaOptions are table creation and schema evolution.
type schemaOptions struct {
	create       *createOptions
	createSchema *arrow.Schema
	createErr    error                    // WithCreateFor: the struct type could not be mapped
	evolve       bool                     // WithSchemaEvolution (evolve.go)
	defaults     map[string]ice.Literal   // WithColumnDefaults (evolve.go)
	deadLetter   func(row any, err error) // WithDeadLetter (evolve.go)
}

func defaultOptions() options {
	return options{
		flush: flushOptions{
			rows:           DefaultFlushRows,
			bytes:          DefaultFlushBytes,
			interval:       DefaultFlushInterval,
			maxInFlight:    DefaultMaxInFlight,
			memoryLimit:    DefaultMemoryLimit,
			maxUncommitted: DefaultMaxUncommitted,
			posOrder:       decimalPositionOrder,
		},
		files: fileOptions{targetFileSize: DefaultTargetFileSize, rowGroupRows: DefaultRowGroupRows},
		keyed: keyOptions{indexBytes: DefaultKeyIndexBytes, supersedeBatch: supersededBatch},
		maint: maintOptions{
			keepSnapshots: -1, // resolved at NewWriter: DefaultKeepSnapshots on tables the writer creates
			rewriteEvery:  defaultRewriteManifests,
			orphanAge:     DefaultWriterOrphanOlderThan,
			smallFiles:    -1,
			convertEvery:  DefaultDeleteConversionEvery,
			deleteRatio:   DefaultDeleteRewriteRatio,
		},
		commit: commitOptions{timeout: DefaultCommitTimeout},
		logger: slog.Default(),
		branch: table.MainBranch,
	}
}

// WithMode sets how Upsert and Delete change existing rows. Default: the table's write.update.mode property,
// else MergeOnRead.
func WithMode(m Mode) Option { return func(o *options) { o.keyed.mode = &m } }

// WithKeys names the key columns of Upsert and Delete. Default: the table's identifier fields. A key column
// must be of a primitive type: NewWriter refuses another one named here (a variant, a struct) with a
// *ColumnError naming it. Identifier fields of such a type (another tool set them) do not stop NewWriter:
// Write works, and Upsert, Delete and Apply return that *ColumnError unless WithKeys names other columns.
func WithKeys(columns ...string) Option {
	return func(o *options) { o.keyed.keys = append([]string(nil), columns...) }
}

// WithFlushRows seals the open buffer into a batch once it holds n rows. Default: DefaultFlushRows (1,000,000).
func WithFlushRows(n int) Option { return func(o *options) { o.flush.rows = n } }

// WithFlushBytes seals the open buffer once it holds n bytes of Arrow data. Default: DefaultFlushBytes (64 MiB).
func WithFlushBytes(n int64) Option { return func(o *options) { o.flush.bytes = n } }

// WithFlushInterval seals the open buffer d after its first row arrived, so that a slow stream still commits
// regularly. Default: DefaultFlushInterval (1 s). Zero disables the timer.
func WithFlushInterval(d time.Duration) Option { return func(o *options) { o.flush.interval = d } }

// WithMaxInFlight sets how many sealed batches encode and upload at once. Commits are always applied in order
// by one commit loop, whatever this number. A batch of an unpartitioned table that holds at least twice the
// flush policy's rows or bytes (one large call) takes the slots left idle to write parts of it at once, each at
// least the policy's size, one file or more each. Default: DefaultMaxInFlight (2).
func WithMaxInFlight(n int) Option { return func(o *options) { o.flush.maxInFlight = n } }

// WithMemoryLimit bounds the memory the writer holds: row data (the open buffer plus batches waiting for or in
// encoding), the metadata of data files written and not yet committed (a batch over many partitions is
// committed in parts, so that it stays within the limit) and a reserve of encoder working memory per batch in
// flight (at least a quarter of the limit stays for rows); docs/guide.md ("Memory") says how each is counted.
// Write blocks while the limit is reached. Default: DefaultMemoryLimit (256 MiB). The Go runtime lets the heap
// grow to about twice the live data between collections (GOGC=100); set GOMEMLIMIT to bound the process itself.
func WithMemoryLimit(n int64) Option { return func(o *options) { o.flush.memoryLimit = n } }

// WithTargetFileSize sets the Parquet data file size at which files are rolled. Default: DefaultTargetFileSize
// (128 MiB); the Parquet row-group limit is set low enough (DefaultRowGroupRows) for rolling to happen.
func WithTargetFileSize(n int64) Option { return func(o *options) { o.files.targetFileSize = n } }

// WithMaxUncommitted bounds the batches sealed but not yet committed. Write blocks at the bound, so a catalog
// outage stops intake instead of growing without end. Default: DefaultMaxUncommitted (64).
func WithMaxUncommitted(n int) Option { return func(o *options) { o.flush.maxUncommitted = n } }

// WithWriterID gives the writer a stable identity: its commits carry the ID, a restarted writer with the same
// ID continues its sequence numbers, fences the older process and finds its checkpoints. A fenced writer
// commits nothing more on any path: its next commit, Compact, a schema change of Write and its maintenance fail
// with ErrFenced, and the writer stops (later calls return ErrWriterFailed wrapping ErrFenced). Each
// commit also records the ID's newest committed (epoch, sequence number) in a table property
// (icewriter.committed.<id>), so a retry after a lost reply knows whether the commit applied even when another
// writer expired its snapshot meanwhile. Without it the writer uses a random ID and leaves no per-ID table
// property behind; such a writer can only look for its commit in the snapshots, and stops with
// ErrCommitStateUnknown (never committing twice) when another writer's expiry removed them first.
func WithWriterID(id string) Option {
	return func(o *options) { o.writerID, o.stableID = id, id != "" }
}

// WithCheckpoints turns on exactly-once mode: a commit never includes rows accepted after its newest
// Checkpoint token, and Flush and Close commit only up to the last checkpoint. Use it with WithWriterID.
func WithCheckpoints() Option { return func(o *options) { o.flush.checkpoints = true } }

// WithPositionOrder sets how two positions of one partition compare: cmp returns c < 0 when a comes before b,
// 0 when equal, c > 0 when after, and ok=false when the two cannot be compared (the check is skipped).
// Checkpoint refuses a position that comes before the partition's last one known to the writer
// (ErrPositionBackwards), and a Router orders ResumePoint's positions by it (pairs it does not compare by
// ComparePositions). Default: two decimal integers compare numerically; any other pair is not compared.
func WithPositionOrder(cmp func(partition, a, b string) (c int, ok bool)) Option {
	return func(o *options) { o.flush.posOrder = cmp }
}

// WithOnCommit registers a callback run after each successful commit, in commit order: it is a HookCommitted
// hook (see Hook), called before those of WithHooks, so it gets the same CommitInfo on the same goroutine. A
// later WithOnCommit replaces the earlier one. A slow callback delays later callbacks and hooks, never a
// commit. A callback may call any Writer method: Write and Checkpoint accept rows as usual; Flush waits for the
// commits (not for their callbacks, which come after the running one); Compact runs in the commit queue; Close
// and Abort close the writer and return without waiting for the callbacks after the running one, which are
// still delivered once it returns. Close and Abort called elsewhere (a goroutine the callback started and waits
// for included) return after every callback has returned, or when their ctx ends. Default: none.
func WithOnCommit(f func(CommitInfo)) Option { return func(o *options) { o.commit.onCommit = f } }

// WithLogger sets the logger. Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithCreate creates the namespace and the table with the given Arrow schema when they do not exist. Tables the
// writer creates get bounded metadata: old metadata files deleted after commit, manifest merging on, and the last
// DefaultKeepSnapshots snapshots kept.
func WithCreate(schema *arrow.Schema, opts ...CreateOption) Option {
	return func(o *options) {
		co := &createOptions{formatVersion: 2}
		for _, f := range opts {
			f(co)
		}
		o.schema.create, o.schema.createSchema = co, schema
	}
}

// WithCommitter replaces the default committer (direct catalog commits with markers, retries and fencing).
func WithCommitter(c Committer) Option { return func(o *options) { o.commit.committer = c } }

// WithCommitTimeout bounds the time the committer spends retrying one run before it gives up. A run whose
// outcome is still unknown then stops the writer with ErrCommitStateUnknown. A failed first attempt is always
// retried once, even when it alone took longer than d: the retry reloads the table and finds out whether it
// applied. It is also how long a commit still in flight when Close or Abort gives up (their context ended) may
// go on in the background before it is cancelled. Default: DefaultCommitTimeout (5 min).
func WithCommitTimeout(d time.Duration) Option {
	return func(o *options) { o.commit.timeout = d }
}

// WithKeepSnapshots keeps the newest n snapshots: once a commit leaves more than n plus a slack of max(10, n/2),
// the writer expires all but the newest n (files no longer referenced are deleted), so expiry runs in steps, not
// at every commit. Default: DefaultKeepSnapshots (100) on tables the writer created, off (0) on others, since
// expiry deletes files another tool may still expect.
func WithKeepSnapshots(n int) Option { return func(o *options) { o.maint.keepSnapshots = n } }

// WithExpireOlderThan also expires snapshots older than d, every 50 commits (opt-in: it deletes files).
// Default: off.
func WithExpireOlderThan(d time.Duration) Option { return func(o *options) { o.maint.expireAge = d } }

// WithRewriteManifestsEvery rewrites the table's manifests every n commits, so that manifest lists stay short,
// and after the first commit that follows each background compaction (WithSmallFileCompactionEvery,
// WithAutoCompactEvery), whose merged manifests keep an entry for every file it removed until then. Default: 200
// commits. Zero disables both.
func WithRewriteManifestsEvery(n int) Option { return func(o *options) { o.maint.rewriteEvery = n } }

// WithAutoCompactEvery runs a compaction as Compact does after every n commits that added delete files, so that
// readers of a merge-on-read table never apply more than about n commits' worth of delete files. Each
// compaction rewrites the data files the deletes apply to (in an unpartitioned table, all of them). It runs off
// the commit path, as WithSmallFileCompactionEvery's passes do. docs/guide.md, "Background maintenance", says how
// it relates to the small-file passes. Default: off.
func WithAutoCompactEvery(n int) Option { return func(o *options) { o.maint.autoCompact = n } }

// WithAutoCompact sets what WithAutoCompactEvery sets.
//
// Deprecated: use WithAutoCompactEvery.
func WithAutoCompact(n int) Option { return WithAutoCompactEvery(n) }

// WithSmallFileCompactionEvery merges small data files every n commits: files under an eighth of the target file
// size, the smallest size tier first once it holds 8 of them, are rewritten together, with their deletes
// applied; larger files only once deletes cover WithDeleteRewriteRatio of their rows (Compact rewrites every
// file with deletes), so each pass costs about what those files weigh. Frequent small commits (a flush every
// few seconds, a CDC stream) otherwise leave readers opening thousands of tiny files. A pass runs off the commit path: it reads and
// writes on the table of the commit that made it due while later flushes commit, then commits its rewrite
// between two of them (one background pass, compaction or conversion, at a time; one due while another runs
// starts after a later commit). Its new files keep that table's sequence number, so equality deletes committed
// meanwhile still apply to them, and deletion vectors and position deletes committed meanwhile on its files are
// moved onto the rows of its new files in its commit; a pass whose files were removed meanwhile is given up and
// the next one due plans again.
// Default: DefaultSmallFileCompactionEvery (32) on tables the writer creates, off on others; 0 turns it off.
func WithSmallFileCompactionEvery(n int) Option { return func(o *options) { o.maint.smallFiles = n } }

// WithSmallFileCompaction sets what WithSmallFileCompactionEvery sets.
//
// Deprecated: use WithSmallFileCompactionEvery.
func WithSmallFileCompaction(n int) Option { return WithSmallFileCompactionEvery(n) }

// WithDeleteRewriteRatio makes each background small-file pass (WithSmallFileCompactionEvery) also rewrite, whatever
// their size, the data files whose deleted rows are at least share r of their rows, as Java Iceberg's
// RewriteDataFiles delete-ratio-threshold does: deleted rows are the record counts of the file's position
// delete files that name it alone and of its deletion vector; equality deletes count as unknown (the
// maintainer converts them first, WithDeleteConversionEvery). Every reader decodes a file's deleted rows and applies
// its deletes until the file is rewritten; the rewrite costs the file's live bytes once. Files past the share
// are rewritten in groups of their own, packed to the target file size. r must be in [0, 1]; 0 turns it off
// (passes then merge small files only). Default: DefaultDeleteRewriteRatio (0.3, Java's default).
func WithDeleteRewriteRatio(r float64) Option { return func(o *options) { o.maint.deleteRatio = r } }

// WithDeleteConversionEvery makes the maintainer convert the table's live equality delete files every n commits
// (ConvertEqualityDeletes): their rows become position deletes (format v2) or deletion vectors (v3) and the
// equality delete files are removed, so readers stop matching every older data file against them. It converts
// anyone's equality deletes: other writers', older versions', and this writer's own when its key index cannot
// place a key. A pass reads the equality columns of the data files the deletes apply to, off the commit path
// (the writer's flushes go on meanwhile; one background pass, conversion or compaction, at a time: one due
// while another runs starts after a later commit). Default: DefaultDeleteConversionEvery (10); 0 turns it off.
func WithDeleteConversionEvery(n int) Option { return func(o *options) { o.maint.convertEvery = n } }

// WithDeleteConversion sets what WithDeleteConversionEvery sets.
//
// Deprecated: use WithDeleteConversionEvery.
func WithDeleteConversion(n int) Option { return WithDeleteConversionEvery(n) }

// WithKeyIndexBytes sets the memory budget of the key index a merge-on-read writer keeps on a format-v2 or v3
// table: the index places each key's row, so upserts and deletes become position delete files (v2, one live
// per data file) or deletion vectors (v3), cheap to read, instead of equality deletes. A writer opening a table
// that already holds rows (its own reopened, or anyone's) reads the key columns of every live data file to
// build it, minus the rows the table's deletes remove. The writer's own compactions move the index to the
// files they write, and it catches up with other writers' commits instead of turning off; a run placed before
// another writer's commit that lands first still falls back to equality deletes (or what WithDeleteFiles says
// instead), and the writer then reloads the table before placing each run. After a compaction commit that
// returned an error (its reply may be lost) the writer uses equality deletes. Past the budget the index spills
// its keys to local disk (WithKeyIndexSpillDir; docs/keyindex-spill.md), so upserts and deletes stay position
// deletes; an index still past its budget after spilling goes off (equality deletes, logged). Stats reports
// KeyIndexBytes and KeyIndexSpilledBytes; docs/guide.md ("Memory") gives what a key and a file cost. Default:
// DefaultKeyIndexBytes (64 MiB); 0 turns the index off.
func WithKeyIndexBytes(n int64) Option { return func(o *options) { o.keyed.indexBytes = n } }

// WithKeyIndexSpillDir sets the local directory the key index spills its keys to past its memory budget
// (WithKeyIndexBytes): 32 bytes a key, plus keys longer than 12 bytes. Its files are unlinked as soon as they are
// opened where the system allows it (Unix), so a crash leaves nothing behind; elsewhere the writer removes them
// when its index is dropped or it closes. NewWriter checks that it can create a file in dir and fails with
// ErrInvalidOption naming this option when it cannot. Default: "" (os.TempDir(), TMPDIR on Unix).
func WithKeyIndexSpillDir(dir string) Option {
	return func(o *options) { o.keyed.spillDir = dir }
}

// WithDeleteFiles sets which kinds of delete files a merge-on-read writer may add (see DeleteFiles): with
// NoEqualityDeletes or NoEqualityDeletesOrFail the table holds only position deletes and deletion vectors,
// which every Iceberg reader applies cheaply. For none at all use WithMode(CopyOnWrite) (NoDeleteFiles, which
// says the same, is deprecated). Default: AnyDeleteFiles.
func WithDeleteFiles(d DeleteFiles) Option { return func(o *options) { o.keyed.deleteFiles = d } }

// WithOrphanOlderThan sets how old the files a writer ID left uncommitted must be before NewWriter removes them.
// With WithWriterID, NewWriter looks (in the background: it never waits for it; at most 10 minutes, and no
// longer than the writer lives) for the files the same ID wrote in earlier epochs, which a process killed
// between uploading and committing leaves behind, and deletes those no snapshot references and older than d.
// The ID's files are recognised by their names, which carry a hash of the table and the ID and the epoch; the
// fence of NewWriter is what makes the earlier epochs' uncommitted files safe to remove (see docs/guide.md,
// "Orphan files"). Writers without WithWriterID, or with WithCommitter, remove nothing; RemoveOrphanFiles
// (OrphanOlderThan) serves any table. Default: DefaultWriterOrphanOlderThan (1 hour), shorter than
// RemoveOrphanFiles' 24 hours because the fence, not the age, is what keeps a fenced epoch's files from ever
// being committed, while RemoveOrphanFiles must wait out any writer's upload in flight. Zero turns the removal
// off (for RemoveOrphanFiles, zero removes every unreferenced file).
func WithOrphanOlderThan(d time.Duration) Option { return func(o *options) { o.maint.orphanAge = d } }

// WithOrphanWindow sets what WithOrphanOlderThan sets.
//
// Deprecated: use WithOrphanOlderThan.
func WithOrphanWindow(d time.Duration) Option { return WithOrphanOlderThan(d) }

// ChangeColumns names the columns of Apply's change stream that are not (or not only) table columns. An empty
// field takes its default.
type ChangeColumns struct {
	// Op is the column holding each row's operation. Default: DefaultOpColumn ("op"; Debezium's
	// ExtractNewRecordState adds it as "__op").
	Op string
	// Version names an optional integer column (a log sequence number, an offset) that makes replays
	// idempotent: a change whose version is lower than the version of the last change accepted for its key is
	// skipped. Default: "" (none).
	Version string
	// BeforePrefix prefixes the before-image key columns: with key id, a column "before_id" carries the key an
	// update changes (a flattened Debezium before.id). Default: DefaultBeforePrefix ("before_").
	BeforePrefix string
	// VersionBytes is the memory the versions of keys may take, out of WithMemoryLimit (the row buffers get
	// that much less): about 64 bytes per key. Default: a quarter of the memory limit; at most half of it.
	// Only used with a Version column.
	VersionBytes int64
}

// Defaults of ChangeColumns.
const (
	DefaultOpColumn     = changes.DefaultOp
	DefaultBeforePrefix = changes.DefaultBeforePrefix
)

// WithChangeColumns names the columns Apply reads besides the table's: the op column, an optional version
// column and the prefix of the before-image key columns (see ChangeColumns and Apply). Each of them is written
// to the table only when the table has a column of that name. Default: ChangeColumns{Op: "op", BeforePrefix:
// "before_"}, no version column.
func WithChangeColumns(c ChangeColumns) Option { return func(o *options) { o.keyed.changes = c } }

// CreateOption configures a table created by WithCreate.
type CreateOption func(*createOptions)

type createOptions struct {
	partitionBy   []string
	defaults      map[string]ice.Literal
	identifiers   []string
	formatVersion int
	properties    map[string]string
	location      string
}

// PartitionBy partitions a created table by Iceberg transforms: "day(ts)", "bucket(16, user_id)", "identity(x)"
// or a bare column name, "truncate(4, s)", "year(ts)", "month(ts)", "hour(ts)", "void(x)".
func PartitionBy(fields ...string) CreateOption {
	return func(c *createOptions) { c.partitionBy = append(c.partitionBy, fields...) }
}

// IdentifierFields sets the identifier (key) columns of a created table; they become required.
func IdentifierFields(columns ...string) CreateOption {
	return func(c *createOptions) { c.identifiers = append(c.identifiers, columns...) }
}

// FormatVersion sets the Iceberg format version of a created table. Default: 2.
func FormatVersion(v int) CreateOption { return func(c *createOptions) { c.formatVersion = v } }

// CreateFormatVersion is the format version of a table created with opts: the last FormatVersion among them,
// else the default, 2. A source that maps its types by format version (the postgres source's json columns,
// variant on v3) asks it of the options it will create its tables with.
func CreateFormatVersion(opts ...CreateOption) int {
	co := createOptions{formatVersion: 2}
	for _, f := range opts {
		f(&co)
	}
	return co.formatVersion
}

// TableProperties sets properties of a created table (they override the writer's defaults).
func TableProperties(p map[string]string) CreateOption {
	return func(c *createOptions) {
		if c.properties == nil {
			c.properties = map[string]string{}
		}
		for k, v := range p {
			c.properties[k] = v
		}
	}
}

// ColumnDefault gives column of a created table a default, value: its initial-default (what readers fill in
// for rows of files written without the column) and its write-default (what the writer fills in for rows
// written without it: Write of a batch that lacks the column). It needs FormatVersion(3): the table is not
// created on an older version, nor with a value the column's type cannot hold, nor for a list, map, struct,
// variant or nanosecond timestamp column (iceberg-go cannot store the last exactly: see AddColumn); each is a
// *ColumnError naming the column (wrapping ErrNotSupported or ErrTypeMismatch).
// value converts to the column's type as AddColumn's initial does. Default: no defaults.
func ColumnDefault(column string, value ice.Literal) CreateOption {
	return func(c *createOptions) {
		if c.defaults == nil {
			c.defaults = map[string]ice.Literal{}
		}
		c.defaults[column] = value
	}
}

// Location sets the storage location of a created table. Default: the catalog's choice.
func Location(uri string) CreateOption { return func(c *createOptions) { c.location = uri } }
