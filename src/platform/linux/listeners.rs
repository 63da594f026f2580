//! TCP listeners made inside the child's network namespace and handed to orchestrate: how
//! a child with no network of its own reaches orchestrate's proxy (and a provider on the
//! host's loopback) without any process of orchestrate's in the namespace.
//!
//! A socket belongs to the network namespace it was created in, whoever holds it later.
//! So the controller, already in the new namespace and before it forks the child, creates
//! each listening socket on the namespace's loopback and sends the descriptors to
//! orchestrate over a socket pair (`SCM_RIGHTS`); orchestrate accepts the child's
//! connections in its own event loop and is itself outside, where the proxy's upstream
//! connections go. This works as root and in a user namespace alike (the namespace's
//! owner may bind any port in it).
//!
//! The controller's half runs after the clone: system calls only, on data built before.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::platform::Listen;

/// Listeners one namespace can get (the proxy and a few bridged providers).
pub(super) const MAX_LISTENERS: usize = 16;
/// Connections the kernel queues for a listener before orchestrate accepts them.
const BACKLOG: libc::c_int = 128;

/// A listener's address as the system calls take it, built before the clone.
#[derive(Clone, Copy)]
pub(super) struct ListenSpec {
    family: libc::c_int,
    addr: libc::sockaddr_storage,
    len: libc::socklen_t,
    optional: bool,
}

impl ListenSpec {
    pub(super) fn new(listen: &Listen) -> ListenSpec {
        // SAFETY: an all-zero sockaddr_storage is valid.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let (family, len) = match listen.addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than, and aligned for, sockaddr_in.
                unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in, sin) };
                (libc::AF_INET, std::mem::size_of::<libc::sockaddr_in>())
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: 0,
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: 0,
                };
                // SAFETY: as above, for sockaddr_in6.
                unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in6, sin6) };
                (libc::AF_INET6, std::mem::size_of::<libc::sockaddr_in6>())
            }
        };
        ListenSpec {
            family,
            addr: storage,
            len: len as libc::socklen_t,
            optional: listen.optional,
        }
    }
}

/// A socket pair for the descriptors: orchestrate's end, the controller's end.
pub(super) fn channel() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: new descriptors, now ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The `cmsg` buffer for up to [`MAX_LISTENERS`] descriptors, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct CmsgBuffer([u8; 128]);

const _: () = assert!(
    std::mem::size_of::<libc::cmsghdr>() + MAX_LISTENERS * std::mem::size_of::<libc::c_int>()
        <= 128
);

/// In the controller, inside the new namespace with its loopback up: creates a listening
/// socket for each spec and sends them to orchestrate (one byte per spec says whether its
/// socket exists: an optional one may not), then closes its own copies and the channel.
/// A required listener that cannot be made fails with its errno.
pub(super) unsafe fn make_and_send(
    specs: &[ListenSpec],
    channel: RawFd,
) -> Result<(), libc::c_int> {
    // SAFETY: system calls on descriptors and buffers of this process only.
    unsafe {
        let mut present = [0u8; MAX_LISTENERS];
        let mut fds = [-1 as libc::c_int; MAX_LISTENERS];
        let mut count = 0;
        let mut failed = 0;
        for (i, spec) in specs.iter().take(MAX_LISTENERS).enumerate() {
            match listen_on(spec) {
                Ok(fd) => {
                    present[i] = 1;
                    fds[count] = fd;
                    count += 1;
                }
                Err(e) if !spec.optional => {
                    failed = e;
                    break;
                }
                Err(_) => {}
            }
        }
        let sent = if failed == 0 {
            send(
                channel,
                &present[..specs.len().min(MAX_LISTENERS)],
                &fds[..count],
            )
        } else {
            Err(failed)
        };
        for fd in &fds[..count] {
            libc::close(*fd);
        }
        libc::close(channel);
        sent
    }
}

unsafe fn listen_on(spec: &ListenSpec) -> Result<RawFd, libc::c_int> {
    // SAFETY: a new socket, options from valid ints, bind from a valid address.
    unsafe {
        let fd = libc::socket(spec.family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(super::controller::errno());
        }
        let one: libc::c_int = 1;
        let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            size,
        );
        if spec.family == libc::AF_INET6 {
            libc::setsockopt(
                fd,
                libc::IPPROTO_IPV6,
                libc::IPV6_V6ONLY,
                (&one as *const libc::c_int).cast(),
                size,
            );
        }
        if libc::bind(
            fd,
            (&spec.addr as *const libc::sockaddr_storage).cast(),
            spec.len,
        ) != 0
            || libc::listen(fd, BACKLOG) != 0
        {
            let e = super::controller::errno();
            libc::close(fd);
            return Err(e);
        }
        Ok(fd)
    }
}

unsafe fn send(channel: RawFd, present: &[u8], fds: &[RawFd]) -> Result<(), libc::c_int> {
    // SAFETY: a message built from buffers that outlive the call.
    unsafe {
        let mut data = [0u8; MAX_LISTENERS];
        data[..present.len()].copy_from_slice(present);
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: present.len().max(1),
        };
        let mut cmsg = CmsgBuffer([0; 128]);
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if !fds.is_empty() {
            let bytes = std::mem::size_of_val(fds) as libc::c_uint;
            msg.msg_control = cmsg.0.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(bytes) as _;
            let header = libc::CMSG_FIRSTHDR(&msg);
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN(bytes) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr(),
                libc::CMSG_DATA(header).cast::<libc::c_int>(),
                fds.len(),
            );
        }
        if libc::sendmsg(channel, &msg, libc::MSG_NOSIGNAL) < 0 {
            return Err(super::controller::errno());
        }
        Ok(())
    }
}

/// In orchestrate, once the child has exec'd: the listeners the controller sent, one per
/// spec in order (None for an optional one that could not be made), non-blocking.
pub(super) fn receive(channel: &OwnedFd, expected: usize) -> io::Result<Vec<Option<OwnedFd>>> {
    let mut data = [0u8; MAX_LISTENERS];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    let mut cmsg = CmsgBuffer([0; 128]);
    // SAFETY: an all-zero msghdr is valid; its pointers are set to live buffers below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.0.as_mut_ptr().cast();
    msg.msg_controllen = cmsg.0.len() as _;
    // SAFETY: receiving into the buffers above; descriptors arrive close-on-exec.
    let n = unsafe {
        libc::recvmsg(
            channel.as_raw_fd(),
            &mut msg,
            libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds: Vec<OwnedFd> = Vec::new();
    // SAFETY: walking the control messages the kernel wrote into `cmsg`.
    unsafe {
        let mut header = libc::CMSG_FIRSTHDR(&msg);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                let payload = (*header).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(header).cast::<libc::c_int>();
                for i in 0..payload / std::mem::size_of::<libc::c_int>() {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            header = libc::CMSG_NXTHDR(&msg, header);
        }
    }
    let truncated = msg.msg_flags & libc::MSG_CTRUNC != 0;
    if n as usize != expected.max(1) || truncated {
        return Err(io::Error::other(format!(
            "the controller sent {n} bytes for {expected} listeners{}",
            if truncated {
                " (descriptors cut off)"
            } else {
                ""
            }
        )));
    }
    let mut fds = fds.into_iter();
    let out: Vec<Option<OwnedFd>> = data[..expected]
        .iter()
        .map(|present| if *present == 1 { fds.next() } else { None })
        .collect();
    if out.iter().filter(|f| f.is_some()).count()
        != data[..expected].iter().filter(|p| **p == 1).count()
    {
        return Err(io::Error::other(
            "the controller sent fewer listeners than it said",
        ));
    }
    for fd in out.iter().flatten() {
        set_nonblocking(fd)?;
    }
    Ok(out)
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: fcntl on an open descriptor.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
