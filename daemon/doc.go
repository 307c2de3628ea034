// Package daemon serves shellagent's sessions on a unix socket, to every
// connection of one user, so that work outlives the editor that started
// it; and it connects to that server, starting one on demand.
//
// A Server accepts connections on a listener it is given (Listen, or the
// one systemd passes, Activated), checks each peer's uid (peercred: SO_PEERCRED, LOCAL_PEERCRED)
// at once, exchanges hellos, and serves each connection exactly as stdio
// is served: protocol.NewConn over one supervisor.Supervisor, ACP v2 or
// v1 as the client chooses. A connection that goes away detaches its
// sessions (Supervisor.Detach under supervisor.KeepDetached): their work
// runs on until session/close, a stop request, or the detached TTL.
//
// # The socket
//
// SocketPath chooses the path: the --socket flag, else $SHELLAGENT_SOCKET,
// else $XDG_RUNTIME_DIR/shellagent/daemon.sock, else
// /tmp/shellagent-UID/daemon.sock. Its directory is the first gate: it is
// created 0700 and refused unless it is a directory (not a symlink), owned
// by the user, and closed to group and others, on a descriptor of it
// (O_DIRECTORY|O_NOFOLLOW, fstat) through which the socket is then bound
// or connected, and its lock file opened: on Linux by the path
// /proc/self/fd/N/NAME, so that a directory swapped in after the check
// is not used. The socket is bound 0600. Nothing at the socket's path
// but a socket is ever removed: a regular file, a FIFO, a symlink or a
// directory there is refused, by the daemon and the client alike.
// The peer check is the second gate: a connection from another uid is
// closed before anything is read or written. Root is not exempt.
//
// Beside the socket, PATH.lock is held (flock) by the daemon for as long
// as it lives, and by a client while it starts one; the kernel lets go of
// it when its holder dies. So a socket file whose connect is refused while
// its lock is free belongs to a dead daemon and may be removed.
// PATH.open.lock is held by the command line (shellagent up) while it
// finds the session of its directory or opens one (LockOpening).
//
// A daemon keeps its socket (Socket.Keep): every half second it looks at
// the path, and binds it again, re-creating the directory and taking a
// new lock file as needed, when someone removed the socket, its lock
// file or the whole directory (rm, a tmp cleaner). On Linux it also
// holds the path's claim, an abstract socket named after the path and
// the user: while it lives no second daemon starts for the path, and a
// client that finds no socket but a live claim waits for the daemon to
// bind again instead of starting one.
//
// # The hello
//
// Each side writes one line first, a Hello: the relay-protocol version
// (RelayVersion), the build, the pid, and, from the client, what it wants:
//
//	{"shellagent":1,"build":"v1.2.0+3f2a9c1e0b4d","pid":4242,"want":"acp"}
//
// The daemon writes its hello first, then reads the client's, for at most
// 5 s; a connection that ends, resets, or sends anything but a hello line
// within 4 KiB is closed, with a log line, and so is one whose serving
// panics (logged with its stack): no peer can end the daemon or another
// connection. After the hellos:
//
//   - want "acp" (or none): the connection carries ACP, newline-delimited
//     JSON-RPC, until either side closes it: requests from the client,
//     and the output either on the connection too or, when the client's
//     hello says "stdout" and carries its stdout (a pipe or a socket, as
//     SCM_RIGHTS), written by the daemon to that descriptor directly, so
//     that it costs no copy through the client. Likewise the requests:
//     when the hello says "stdin" and carries the client's stdin too
//     (after its stdout), the daemon reads them from it, through the
//     runtime poller, and the client writes nothing more on the
//     connection; the connection then ends when the stdin does or when
//     the client's end of the socket goes (its stdin is let go then, even
//     though its writer, an editor, may still be there). A hello that
//     says "stdin" and carries none is refused. The daemon serves only a
//     client of its own version and build; it closes any other right
//     after its hello, and the client, which sees both builds, refuses
//     its editor's initialize with an error that names them.
//   - want "status": the daemon writes one line, a Status, and closes.
//   - want "stop": the daemon closes every session as session/close does
//     (each with its own kill grace), writes one line, a Stopped, that
//     lists what was running, closes, and exits. Status and stop work
//     across builds, so that an old daemon can always be stopped.
//   - want "upgrade", with "exe": the absolute path of a new binary: the
//     daemon upgrades in place to it (below) and the connection gets one
//     line, an Upgraded, from the new image once it serves, or from the
//     old one, with the reason, when the upgrade was refused or rolled
//     back. Upgrade works across builds too: that is its point.
//
// # Upgrade in place
//
// Server.Upgrade execs the new binary in this very process, so that the
// daemon keeps its pid and stays the parent and subreaper of every
// process its sessions run. First it runs "EXE daemon --upgrade-probe",
// which must print a Probe (its build, the state versions it reads,
// StateVersion among them) within ProbeTimeout; else nothing has changed
// and the answer says why. Then it stops serving ACP, closes the ACP
// connections (their sessions detach), asks its Host to Freeze, and
// duplicates the listener, the lock, the requester's connection and the
// Host's files, naming each in a manifest (with the pid and start time
// of each pidfd's process) written to a memfd; it clears close-on-exec
// on exactly those and execs "EXE daemon --upgrade-state=FD FLAGS...".
// If the exec fails, everything is put back and the Host thawed. The new
// image calls Resume, rebuilds its Host from Resumed, serves the same
// listener, and answers the requester (Resumed.Answer). The daemon's
// Host is its supervisor.Supervisor (Freeze, Precheck, Restore).
//
// # Starting on demand
//
// Connect dials; where no daemon answers (no socket file, or connect
// refused) it takes the lock without waiting, dials again, removes a
// refused socket, and starts a daemon, which inherits the lock; then it
// dials until the daemon answers, for at most StartTimeout. A client that
// finds the lock taken waits for that daemon to answer instead of
// starting another, so N clients started at once give one daemon.
//
// Files: doc.go (this comment), socket.go (the socket's path, the
// directory checks by path, Activated), dir.go and dir_*.go (the checked
// directory descriptor that binds, connects and locks go through),
// listen.go (Listen, Socket and its Keep, the Listener), claim_*.go (the
// abstract claim that keeps a second daemon off a path), lock.go (the
// lock beside the socket), hello.go (the hello, and the answers to status
// and stop), server.go (the Server), dial.go and dial_*.go (the client
// side: Dial, Connect, AskStatus, AskStop; OwnPipe), upgrade.go (the
// Host, the probe, the server's side of an upgrade, AskUpgrade),
// upgrade_*.go (the hand-over by exec, Resume).
package daemon
