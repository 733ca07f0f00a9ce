#ifndef GATTWAY_CMICROHTTPD_SHIM_H
#define GATTWAY_CMICROHTTPD_SHIM_H
// libmicrohttpd, plus non-variadic wrappers of its variadic calls (Swift cannot call a C
// variadic function).
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <microhttpd.h>

/// The connection limit as the server keeps it: libmicrohttpd's own limit closes a connection
/// beyond it without telling anyone, so the accept policy below refuses it first and counts it.
struct gattway_mhd_limit {
    /// Each new connection's socket send buffer (0: the kernel's default).
    int send_buffer;
    /// Connections started and not closed yet.
    unsigned int open;
    /// At most this many at once.
    unsigned int limit;
    /// Connections refused at the limit so far.
    unsigned long refused;
};

/// Counts connections as they start and close, and sets each new one's socket send buffer to
/// `send_buffer`, so a client that does not read holds at most that much in the kernel on our side.
static inline void gattway_mhd_connection_notify(
    void *cls, struct MHD_Connection *connection, void **socketContext, enum MHD_ConnectionNotificationCode toe)
{
    (void) socketContext;
    struct gattway_mhd_limit *limit = cls;
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (limit->open > 0) limit->open -= 1;
        return;
    }
    if (toe != MHD_CONNECTION_NOTIFY_STARTED) return;
    limit->open += 1;
    int size = limit->send_buffer;
    if (size <= 0) return;
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info != NULL) (void) setsockopt(info->connect_fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
}

/// The accept policy: a connection beyond the limit is refused (libmicrohttpd closes it) and counted.
static inline enum MHD_Result gattway_mhd_accept(void *cls, const struct sockaddr *address, socklen_t length) {
    (void) address;
    (void) length;
    struct gattway_mhd_limit *limit = cls;
    if (limit->open >= limit->limit) {
        limit->refused += 1;
        return MHD_NO;
    }
    return MHD_YES;
}

/// The daemon in external-poll mode over epoll (one descriptor for the caller's poll loop), with
/// suspend/resume, bound to `address`, with the limits given; TLS when `cert` and `key` (PEM
/// text) are both non-NULL. NULL when it cannot start (MHD logs why with MHD_USE_ERROR_LOG).
static inline struct MHD_Daemon *gattway_mhd_start(
    const struct sockaddr_in *address, struct gattway_mhd_limit *limit, size_t memoryLimit,
    unsigned int timeoutSeconds, const char *cert, const char *key, MHD_AccessHandlerCallback handler,
    void *context, MHD_RequestCompletedCallback completed, void *(*uriLog)(void *, const char *, struct MHD_Connection *))
{
    unsigned int flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
    struct MHD_OptionItem tls[] = {
        { MHD_OPTION_HTTPS_MEM_CERT, 0, (void *) cert },
        { MHD_OPTION_HTTPS_MEM_KEY, 0, (void *) key },
        { MHD_OPTION_END, 0, NULL },
    };
    if (cert != NULL && key != NULL) {
        flags |= MHD_USE_TLS;
    } else {
        tls[0].option = MHD_OPTION_END;
    }
    // libmicrohttpd's own limit one above ours: the accept policy refuses (and counts) first.
    return MHD_start_daemon(
        flags, ntohs(address->sin_port), gattway_mhd_accept, limit, handler, context,
        MHD_OPTION_SOCK_ADDR, (const struct sockaddr *) address,
        MHD_OPTION_CONNECTION_LIMIT, limit->limit + 1,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, memoryLimit,
        MHD_OPTION_CONNECTION_TIMEOUT, timeoutSeconds,
        MHD_OPTION_NOTIFY_COMPLETED, completed, context,
        MHD_OPTION_URI_LOG_CALLBACK, uriLog, context,
        MHD_OPTION_NOTIFY_CONNECTION, gattway_mhd_connection_notify, limit,
        MHD_OPTION_ARRAY, tls,
        MHD_OPTION_END);
}

/// The epoll descriptor the caller polls for reading (then calls MHD_run); -1 when none.
static inline int gattway_mhd_epoll_fd(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
    return info == NULL ? -1 : info->epoll_fd;
}

/// The port the daemon listens on (useful with port 0); 0 when unknown.
static inline uint16_t gattway_mhd_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

/// Connections open now.
static inline unsigned int gattway_mhd_connections(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return info == NULL ? 0 : info->num_connections;
}

/// A connection's socket; -1 when unknown.
static inline int gattway_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}
#endif
