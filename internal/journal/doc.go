// Package journal keeps each session's history on disk: one append-only
// JSONL file per session, written by one goroutine for the whole Store,
// so that a session outlives the agent that ran it (session/list and
// session/resume of a past session).
//
// # Files
//
// A state directory (DefaultDir, or --state-dir) holds sessions/ (mode
// 0700), and in it one file per session, ID.jsonl (mode 0600), the
// corrupt files set aside, ID.jsonl.corrupt (see Format), and for
// a moment the temporary files (.ID.*.tmp) of a creation or a
// compaction. The files are the only truth: the Store's index (what
// List, Exists and Stat answer from) is rebuilt from them at Open, and
// again for what other processes changed at Refresh, from each file's
// header and its lines from its last mark on (see below), never the whole
// file; a file is read whole only to be loaded, made live again,
// compacted or written to, and not when an upgrade in place hands over
// what the writer knows of it (see Processes). No file holds a path of the state directory,
// so a directory that is moved, copied or restored keeps working.
//
// # Processes
//
// Several processes may share a directory (stdio agents, the daemon).
// A process holds an exclusive flock on the file of each session live in
// it (created or reopened there, not closed since), on a descriptor of
// its own; the kernel drops it when the process dies. Another process
// lists such a session with Info.Elsewhere, and Reopen and Delete of it
// are ErrLive (a *LiveError, with the holder's pid where /proc/locks
// says); pruning skips it. A new file is written with its header and
// its first meta line to a temporary file, locked, fsynced and renamed
// into place, so that no process (nor the next one, after a crash) sees
// a session file without its cwd; a compaction's file is
// locked before its rename too.
//
// An upgrade in place execs the next image of the process, which drops
// the locks. The old image's Handover writes what is queued and returns
// what its writer knows of each live session's file (its size, its
// identity, the byte counts compaction and output need); the new image's
// Adopt locks the file again and, if it is still the file handed over,
// writes on from that without reading it; a file changed in between is
// read as Reopen reads it.
//
// # Format
//
// Each line is one JSON object; "t" says its kind and "at" when it
// happened (RFC 3339, UTC). The first line is the header; a file whose
// first line is not a header of version 1 for the file's id is corrupt.
//
//	{"t":"session","v":1,"id":"sess_1","at":"…"}            header
//	{"t":"meta","at":"…","cwd":"/p","title":"make test"}     cwd and title, from now on
//	{"t":"update","at":"…","u":{…}}                          a session/update's update (a message)
//	{"t":"update","at":"…","item":"call_3","u":{…}}          the state of item call_3, from now on
//	{"t":"out","at":"…","term":"term_1","d":"aGVsbG8K"}      output of a terminal, base64
//	{"t":"gap","at":"…","term":"term_1","n":4096}            output bytes that were not kept
//	{"t":"exit","at":"…","term":"term_1","status":{"exitCode":0}}
//	{"t":"prompt","at":"…","key":"k1","messageId":"msg_3"}   a prompt accepted with an idempotencyKey
//	{"t":"config","at":"…","option":"foreground_timeout","value":"30s"}  a config option's value, from now on
//	{"t":"ids","at":"…","ids":{"call":32,"msg":33,"term":32}}  ids the session may show up to (a reservation)
//	{"t":"mark","at":"…","cwd":"/p","title":"…","closed":true}  what List shows, as of this line
//	{"t":"forget","at":"…","item":"term_1"}                  item term_1 (and terminal term_1) retired: gone
//	{"t":"closed","at":"…"}                                  the session was closed
//	{"t":"open","at":"…"}                                    … and made live again
//
// Reading a file (Load) gives: the updates in the order they were
// first recorded, where an update with an item stands at the place of
// the item's first update with the content of its last one (what a
// replay sends: each message once, each tool call and terminal once at
// its latest state), without the items forgotten; each terminal's last Scrollback bytes of output,
// the count of every byte it wrote, and its exit status if one was
// recorded; the accepted prompts' keys; each config option's last value;
// the highest reservation of ids of each prefix; cwd, title, the time of the last record, and whether the last of
// closed and open was closed. Lines of an unknown kind are skipped, for a
// newer build's files.
//
// A mark repeats what List shows (cwd, title, closed, and as "at" the
// time of the latest record before it). The writer appends one after a
// batch once 16 KiB were written since the last, and at the end of a
// compacted file, so the index reads a file's header and its last 16 KiB
// or so, whatever its size, and still sees a title set early in a long
// session. A file without marks (a small one, or an older build's) is
// read whole.
//
// A line that does not end in a newline is torn (the writer died in
// it): it is dropped on load, and cut off before the file is written
// again. Any other line that is not JSON makes the file corrupt: it is
// skipped for good, with one log line, and set aside as it is, renamed
// ID.jsonl.corrupt (SetAside), which the index ignores, in every process
// and every Open to come; not one another process holds live, nor one
// whose header is of a newer version (a newer build's), which are only
// skipped (logged once per process). The index sees a corrupt line only
// in the part of the file it reads; one before the last mark is found
// when the session is loaded: Load and Reopen fail with a *CorruptError
// (ErrCorrupt), and the file is skipped and set aside as if the index
// had found it so. A file set aside counts in Options.Max and goes first
// when the history is pruned; Delete of its session removes it.
//
// # Writing
//
// Appends (Update, Exit, …) never wait for the disk: they queue the
// record and return. Reserve, Prompt, Exit and Config alone wait until
// their record is written (not fsynced): a session reserves ids before it
// shows them, a block at a time, records an idempotencyKey or a config
// option's value before it answers the request and an exit status before
// it sends it, since the records of what it shows are otherwise written
// after its client may have read them. On a disk that hangs such a wait gives up after 2 s, and none
// waits again until the writer has written a batch. A terminal's output is not queued at all: each
// terminal already keeps its last output in a ring with absolute offsets
// (outputbuf), and the writer reads from it what the file lacks (Attach,
// Tap) at most a second after it was written, before the terminal's exit
// status, at its session's durable points and at Flush and Close: the
// last Scrollback bytes of it, a gap for the rest. So output costs the
// terminal no copy beyond its ring and the Store no memory, however fast it comes and
// however slow the disk. Other records have a bound (Options.Queue),
// past which an append waits for the writer, which happens only if the
// disk stalls for as long as the sessions take to report that much. The
// writer batches what is queued into one write per file, and fsyncs a
// file at every durable point (Sync, Exit, Closed) and at most a second
// after it was written otherwise.
//
// A file is compacted once the records it no longer needs (output beyond
// its terminal's scrollback, an item's earlier states) are at least
// Options.CompactAt bytes and half the file: the writer writes what Load
// would read to a temporary file beside it, fsyncs it, renames it over
// the file and fsyncs the directory; a crash leaves the old file or the
// new one, never part of one. It reads the file twice, once for what
// each terminal keeps, then to copy the out lines that hold it, so a
// compaction holds neither the file nor its output.
//
// On a full (or failing) disk, a write that fails is cut back to the
// file's last whole line, and the file then drops what it is given
// until its next try: after 1 s, then twice as long after each failure,
// at most 30 s (retry.go), when the writer reads the file again and goes
// on from what it holds (the records dropped are lost; each terminal's
// output goes on from what its ring holds, a gap for the rest). A
// compaction that fails is tried again on the same schedule. Each run of
// failures is logged once as it starts and once as it ends; nothing is
// held for the disk meanwhile.
//
// Past Options.Max bytes in all, the corrupt files set aside are removed,
// the oldest first, then sessions, the least recently updated first:
// first those that are closed, then those never
// closed (their agent died) once the Store has been open for 30 s (a
// daemon upgraded in place makes its sessions live again before) and
// their file has not been touched for 30 s (Handover touches the file of
// each session live in the old image, which no process holds locked
// until the new image adopts it); never one live in this Store, nor one
// another process holds, nor one another process wrote to since the
// index read it.
package journal
