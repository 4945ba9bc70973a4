//! The `uffd` snapshot method: the kernel does the copy-on-write, with userfaultfd
//! write-protection on the arena's memfd mapping.
//!
//! Write-protection acts on one process's page tables, and `fork()` cannot snapshot memory that
//! many processes share, so every backend that writes the arena registers *its own* mapping:
//! on its first write section it opens a userfaultfd (`UFFD_USER_MODE_ONLY`: works without
//! privileges), registers the arena range in write-protect mode and hands the descriptor to the
//! OLAP worker over a unix socket (SCM_RIGHTS). The writer keeps its own reference to the same
//! descriptor only to lift its *own* protection (below); when the worker exits it lifts every
//! protection it armed first, and if it is killed the postmaster restarts the cluster (a writer
//! blocked in a fault wakes for the signal).
//!
//! At snapshot time (gate closed) the worker write-protects the *hot* blocks (modified since the
//! previous snapshot) in every registered writer and records, per writer and per block, that the
//! kernel traps writes for this epoch. Writes to other blocks, and writes of processes not
//! armed, are preserved by the writer itself (`cow::before_write`), so the cost of taking a
//! snapshot follows the hot data, not the arena size. A trapped write blocks in the kernel until
//! the worker's fault-handler thread has saved the page's pre-image (`cow::preserve_page`) and
//! lifted the protection of that page in every writer, so each page faults once per snapshot.
//!
//! Writer-side resolution (`scoot.uffd_writer_resolves`, default on): a write the storage layer
//! announces (`cow::before_write`, i.e. every tuple write) need not wait for the round trip to
//! the worker (two cross-CPU wake-ups, tens of microseconds on a VM). The writer saves the
//! pre-image itself. Row writes (cells, version headers, free-map words:
//! `cow::before_write_block_via`) then go through the arena's alias mapping (`arena::alias_of`,
//! the same memory mapped a second time, never registered), so the protection stays; other
//! announced writes lift the protection of that page in the writer's own page table through its
//! own descriptor (one ioctl, then a dirty-tracking fault on the write; it remembers per page
//! the epoch it did so). The kernel protection stays the guarantee: any write not announced
//! still traps and the worker resolves it.
//!
//! The fault-handler thread never calls into PostgreSQL (no locks, no palloc, no elog): it only
//! uses atomics in shared memory, the pre-image pool and ioctls.
use crate::snapshot::registry;
use crate::storage::{arena, cow};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

const UFFD_USER_MODE_ONLY: i32 = 1;
const UFFD_API: u64 = 0xAA;
const UFFD_FEATURE_WP_HUGETLBFS_SHMEM: u64 = 1 << 12;
const UFFDIO_API: libc::c_ulong = 0xc018aa3f;
const UFFDIO_REGISTER: libc::c_ulong = 0xc020aa00;
const UFFDIO_WRITEPROTECT: libc::c_ulong = 0xc018aa06;
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioWriteprotect {
    range: UffdioRange,
    mode: u64,
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// Opens a userfaultfd with write-protect support for shmem. Err: why not.
fn open_uffd() -> Result<i32, String> {
    unsafe {
        let fd = libc::syscall(
            libc::SYS_userfaultfd,
            libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY,
        ) as i32;
        if fd < 0 {
            return Err(err("userfaultfd"));
        }
        let mut api = UffdioApi {
            api: UFFD_API,
            features: UFFD_FEATURE_WP_HUGETLBFS_SHMEM,
            ioctls: 0,
        };
        if libc::ioctl(fd, UFFDIO_API, &mut api) != 0 {
            let e = err("UFFDIO_API (write-protect on shmem)");
            libc::close(fd);
            return Err(e);
        }
        Ok(fd)
    }
}

fn register_range(fd: i32, start: usize, len: usize) -> Result<(), String> {
    let mut r = UffdioRegister {
        range: UffdioRange {
            start: start as u64,
            len: len as u64,
        },
        mode: UFFDIO_REGISTER_MODE_WP,
        ioctls: 0,
    };
    if unsafe { libc::ioctl(fd, UFFDIO_REGISTER, &mut r) } != 0 {
        return Err(err("UFFDIO_REGISTER"));
    }
    Ok(())
}

fn writeprotect(fd: i32, start: usize, len: usize, on: bool) -> Result<(), i32> {
    let mut w = UffdioWriteprotect {
        range: UffdioRange {
            start: start as u64,
            len: len as u64,
        },
        mode: if on { UFFDIO_WRITEPROTECT_MODE_WP } else { 0 },
    };
    if unsafe { libc::ioctl(fd, UFFDIO_WRITEPROTECT, &mut w) } != 0 {
        return Err(errno());
    }
    Ok(())
}

/// Checks that write-protection works on a memfd mapping in this process.
fn probe() -> Result<(), String> {
    unsafe {
        let fd = open_uffd()?;
        let mfd = libc::memfd_create(c"scoot_uffd_probe".as_ptr(), 0);
        if mfd < 0 || libc::ftruncate(mfd, 4096) != 0 {
            libc::close(fd);
            return Err(err("memfd_create"));
        }
        let p = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            mfd,
            0,
        );
        let res = if p == libc::MAP_FAILED {
            Err(err("mmap"))
        } else {
            *(p as *mut u8) = 1;
            let r = register_range(fd, p as usize, 4096)
                .and_then(|_| {
                    writeprotect(fd, p as usize, 4096, true).map_err(|_| err("UFFDIO_WRITEPROTECT"))
                })
                .and_then(|_| {
                    writeprotect(fd, p as usize, 4096, false)
                        .map_err(|_| err("UFFDIO_WRITEPROTECT"))
                });
            libc::munmap(p, 4096);
            r
        };
        libc::close(mfd);
        libc::close(fd);
        res
    }
}

fn socket_name() -> Vec<u8> {
    let mut v = vec![0u8];
    v.extend_from_slice(
        format!("pg_scoot_uffd_{}", unsafe { pgrx::pg_sys::PostmasterPid }).as_bytes(),
    );
    v
}

fn sockaddr(name: &[u8]) -> (libc::sockaddr_un, libc::socklen_t) {
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (i, &b) in name.iter().enumerate() {
        a.sun_path[i] = b as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + name.len();
    (a, len as libc::socklen_t)
}

// ---------------------------------------------------------------- the writer (any backend)

/// Registers this process's arena mapping with the OLAP worker (called on the first write
/// section). Any failure leaves the process on the software path.
pub fn register_self() {
    if crate::snapshot::worker::is_worker() || !registry::is_ready() {
        return;
    }
    let r = registry::reg();
    if r.method.load(Ordering::Acquire) != registry::M_UFFD
        || r.worker_pid.load(Ordering::Acquire) == 0
    {
        return;
    }
    unsafe {
        let Ok(fd) = open_uffd() else { return };
        if register_range(fd, arena::base() as usize, arena::bytes()).is_err() {
            libc::close(fd);
            return;
        }
        let sock = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if sock < 0 {
            libc::close(fd);
            return;
        }
        let (addr, len) = sockaddr(&socket_name());
        if libc::connect(sock, &addr as *const _ as *const libc::sockaddr, len) == 0 {
            let msg: [i32; 2] = [(*pgrx::pg_sys::MyProc).pgprocno, pgrx::pg_sys::MyProcPid];
            send_fd(sock, fd, &msg);
        }
        libc::close(sock);
        // keep a reference to lift this process's own protection of a page it is about to write
        // (the worker lifts everything it armed before it exits)
        let npages = arena::bytes() / cow::PAGE;
        let open = libc::mmap(
            std::ptr::null_mut(),
            npages * 4,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        );
        if open == libc::MAP_FAILED {
            libc::close(fd);
            return;
        }
        OWN_OPEN = open as *mut u32;
        OWN_FD = fd;
    }
}

/// This process's own descriptor (kept after handing it to the worker), or -1.
static mut OWN_FD: i32 = -1;
/// Per arena page: the epoch in which this process lifted its own protection of the page
/// (private, lazily populated memory).
static mut OWN_OPEN: *mut u32 = std::ptr::null_mut();

fn own_is_open(p: u32, live: u32) -> bool {
    unsafe { *OWN_OPEN.add(p as usize) == live }
}

fn own_lift(p: u32, live: u32) -> bool {
    unsafe {
        let addr = arena::base() as usize + p as usize * cow::PAGE;
        if writeprotect(OWN_FD, addr, cow::PAGE, false).is_err() {
            return false;
        }
        *OWN_OPEN.add(p as usize) = live;
    }
    true
}

static OWN_TRAP: cow::OwnTrap = cow::OwnTrap {
    is_open: own_is_open,
    lift: own_lift,
};

/// `cow::OWN_TRAP`: this process resolves its own announced trapped writes when it kept its
/// descriptor and `scoot.uffd_writer_resolves` is on.
pub fn own_trap() -> Option<&'static cow::OwnTrap> {
    if unsafe { OWN_FD } >= 0 && crate::guc::UFFD_WRITER_RESOLVES.get() {
        Some(&OWN_TRAP)
    } else {
        None
    }
}

unsafe fn send_fd(sock: i32, fd: i32, payload: &[i32; 2]) {
    unsafe {
        let mut iov = libc::iovec {
            iov_base: payload.as_ptr() as *mut libc::c_void,
            iov_len: 8,
        };
        let mut cbuf = [0u8; 64];
        let mut m: libc::msghdr = std::mem::zeroed();
        m.msg_iov = &mut iov;
        m.msg_iovlen = 1;
        m.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        m.msg_controllen = libc::CMSG_SPACE(4) as usize;
        let c = libc::CMSG_FIRSTHDR(&m);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(4) as usize;
        std::ptr::copy_nonoverlapping(&fd as *const i32 as *const u8, libc::CMSG_DATA(c), 4);
        libc::sendmsg(sock, &m, libc::MSG_NOSIGNAL);
    }
}

/// Receives (payload, fd) from a connected socket.
unsafe fn recv_fd(sock: i32) -> Option<([i32; 2], i32)> {
    unsafe {
        let mut payload = [0i32; 2];
        let mut iov = libc::iovec {
            iov_base: payload.as_mut_ptr() as *mut libc::c_void,
            iov_len: 8,
        };
        let mut cbuf = [0u8; 64];
        let mut m: libc::msghdr = std::mem::zeroed();
        m.msg_iov = &mut iov;
        m.msg_iovlen = 1;
        m.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        m.msg_controllen = cbuf.len();
        let n = libc::recvmsg(sock, &mut m, libc::MSG_CMSG_CLOEXEC);
        if n != 8 {
            return None;
        }
        let c = libc::CMSG_FIRSTHDR(&m);
        if c.is_null() || (*c).cmsg_type != libc::SCM_RIGHTS {
            return None;
        }
        let mut fd = -1i32;
        std::ptr::copy_nonoverlapping(libc::CMSG_DATA(c), &mut fd as *mut i32 as *mut u8, 4);
        Some((payload, fd))
    }
}

// ---------------------------------------------------------------- the server (OLAP worker)

struct Writer {
    fd: i32,
    procno: i32,
    pid: i32,
    dead: bool,
}

struct Shared {
    writers: Mutex<Vec<Writer>>,
    stop: AtomicBool,
    listen: i32,
}

pub struct Server {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

static mut GLOBAL: Option<Arc<Shared>> = None;

impl Server {
    /// Checks that userfaultfd write-protection works here, listens for writers and starts the
    /// fault-handler thread.
    pub fn start() -> Result<Server, String> {
        probe()?;
        let listen = unsafe {
            let s = libc::socket(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            );
            if s < 0 {
                return Err(err("socket"));
            }
            let (addr, len) = sockaddr(&socket_name());
            if libc::bind(s, &addr as *const _ as *const libc::sockaddr, len) != 0
                || libc::listen(s, 128) != 0
            {
                let e = err("bind/listen");
                libc::close(s);
                return Err(e);
            }
            s
        };
        let shared = Arc::new(Shared {
            writers: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            listen,
        });
        let sh = shared.clone();
        // the thread must never run PostgreSQL's signal handlers: block every signal while
        // spawning it (it inherits the mask)
        let thread = unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
            let t = std::thread::Builder::new()
                .name("scoot-uffd".into())
                .spawn(move || fault_loop(sh));
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            t.map_err(|e| format!("thread: {e}"))?
        };
        unsafe { GLOBAL = Some(shared.clone()) };
        Ok(Server {
            shared,
            thread: Some(thread),
        })
    }

    /// Write-protects the hot blocks of the live snapshot `epoch` in every registered writer,
    /// after the gate has reopened (writers meanwhile preserve pages themselves). First every
    /// writer registered now is marked armed for `epoch`; then, a few blocks at a time, a block
    /// is protected in all of them and only then marked armed: a writer lets the kernel
    /// preserve a page only when both it and the block are armed for the newest snapshot. The
    /// writers' lock is released between chunks so that faults keep being resolved.
    /// Returns the writers armed and the bytes protected per writer.
    pub fn arm(&mut self, hot: &[u32], epoch: u32) -> (u32, u64) {
        let bs = arena::block_size();
        let base = arena::base() as usize;
        let mut n = 0;
        {
            let ws = self.shared.writers.lock().unwrap();
            for w in ws.iter().filter(|w| !w.dead) {
                if let Some(s) = cow::section(w.procno as usize) {
                    s.armed.store(
                        ((w.pid as u32 as u64) << 32) | epoch as u64,
                        Ordering::Release,
                    );
                    n += 1;
                }
            }
        }
        let chunk_blocks = (8 << 20) / bs;
        for chunk in hot.chunks(chunk_blocks.max(1)) {
            if cow::ctl().last_epoch.load(Ordering::Acquire) != epoch {
                break; // a newer snapshot exists: it arms its own hot blocks
            }
            // contiguous runs of hot blocks
            let mut runs: Vec<(usize, usize)> = Vec::new();
            for &b in chunk {
                let start = base + b as usize * bs;
                match runs.last_mut() {
                    Some((s, l)) if *s + *l == start => *l += bs,
                    _ => runs.push((start, bs)),
                }
            }
            let mut ws = self.shared.writers.lock().unwrap();
            for w in ws.iter_mut().filter(|w| !w.dead) {
                for &(s, l) in &runs {
                    if writeprotect(w.fd, s, l, true).is_err() {
                        w.dead = true; // ESRCH: the process has exited
                        break;
                    }
                }
            }
            for &b in chunk {
                arena::block_desc(b).armed.store(epoch, Ordering::Release);
            }
        }
        (n, hot.len() as u64 * bs as u64)
    }

    pub fn stop(mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Stops the fault handler from the exit path and lifts every protection in every writer now:
/// writers keep their own reference to their descriptor, so its registration outlives this
/// process, and no page may stay write-protected with nobody left to resolve the fault.
pub fn stop_global() {
    unsafe {
        #[allow(static_mut_refs)]
        if let Some(sh) = GLOBAL.as_ref() {
            sh.stop.store(true, Ordering::Release);
            let base = arena::base() as usize;
            let ws = sh.writers.lock().unwrap_or_else(|e| e.into_inner());
            for w in ws.iter().filter(|w| !w.dead) {
                let _ = writeprotect(w.fd, base, arena::bytes(), false);
            }
        }
    }
}

fn accept_writers(sh: &Shared) {
    loop {
        let c = unsafe {
            libc::accept4(
                sh.listen,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            )
        };
        if c < 0 {
            return;
        }
        unsafe {
            // only processes of our own user may register
            let mut cred: libc::ucred = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
            let ok = libc::getsockopt(
                c,
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                &mut cred as *mut _ as *mut libc::c_void,
                &mut len,
            ) == 0
                && cred.uid == libc::geteuid();
            if ok {
                if let Some(([procno, pid], fd)) = recv_fd(c) {
                    let mut ws = sh.writers.lock().unwrap();
                    // a newer registration of the same PGPROC slot replaces the old one
                    for w in ws.iter_mut() {
                        if w.procno == procno {
                            w.dead = true;
                        }
                    }
                    ws.push(Writer {
                        fd,
                        procno,
                        pid,
                        dead: false,
                    });
                }
            }
            libc::close(c);
        }
    }
}

fn fault_loop(sh: Arc<Shared>) {
    let base = arena::base() as usize;
    let end = base + arena::bytes();
    let mut pfds: Vec<libc::pollfd> = Vec::new();
    while !sh.stop.load(Ordering::Acquire) {
        {
            let mut ws = sh.writers.lock().unwrap();
            ws.retain(|w| {
                if w.dead {
                    unsafe { libc::close(w.fd) };
                }
                !w.dead
            });
            pfds.clear();
            pfds.push(libc::pollfd {
                fd: sh.listen,
                events: libc::POLLIN,
                revents: 0,
            });
            for w in ws.iter() {
                pfds.push(libc::pollfd {
                    fd: w.fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
        }
        let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 100) };
        if n <= 0 {
            continue;
        }
        if pfds[0].revents & libc::POLLIN != 0 {
            accept_writers(&sh);
        }
        for k in 1..pfds.len() {
            let re = pfds[k].revents;
            if re == 0 {
                continue;
            }
            if re & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 && re & libc::POLLIN == 0
            {
                let mut ws = sh.writers.lock().unwrap();
                if let Some(w) = ws.iter_mut().find(|w| w.fd == pfds[k].fd) {
                    w.dead = true;
                }
                continue;
            }
            let mut msg = [0u8; 32];
            loop {
                let r =
                    unsafe { libc::read(pfds[k].fd, msg.as_mut_ptr() as *mut libc::c_void, 32) };
                if r != 32 {
                    break;
                }
                if msg[0] != UFFD_EVENT_PAGEFAULT {
                    continue;
                }
                let addr = u64::from_ne_bytes(msg[16..24].try_into().unwrap()) as usize;
                if addr < base || addr >= end {
                    continue;
                }
                let t0 = std::time::Instant::now();
                let page = addr & !(cow::PAGE - 1);
                let p = ((page - base) / cow::PAGE) as u32;
                let mut ws = sh.writers.lock().unwrap();
                // save the pre-image, then let every writer write the page again: first the one
                // that faulted (lifting its protection wakes it), then the others
                cow::preserve_page(p);
                let me = pfds[k].fd;
                if let Err(e) = writeprotect(me, page, cow::PAGE, false) {
                    if e == libc::ESRCH {
                        if let Some(w) = ws.iter_mut().find(|w| w.fd == me) {
                            w.dead = true;
                        }
                    }
                }
                for w in ws.iter_mut().filter(|w| !w.dead && w.fd != me) {
                    if let Err(e) = writeprotect(w.fd, page, cow::PAGE, false) {
                        if e == libc::ESRCH {
                            w.dead = true;
                        }
                    }
                }
                drop(ws);
                let r = registry::reg();
                r.uffd_faults.fetch_add(1, Ordering::Relaxed);
                r.uffd_fault_ns
                    .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
            }
        }
    }
    // lift every protection so that no writer stays blocked
    let ws = sh.writers.lock().unwrap();
    for w in ws.iter() {
        let _ = writeprotect(w.fd, base, end - base, false);
    }
}
