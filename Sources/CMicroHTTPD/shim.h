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

/// Sets each new connection's socket send buffer to the size carried in `cls` (an integer, not a
/// pointer; 0: the kernel's default), so a client that does not read holds at most that much in
/// the kernel on our side.
static inline void gattway_mhd_connection_started(
    void *cls, struct MHD_Connection *connection, void **socketContext, enum MHD_ConnectionNotificationCode toe)
{
    (void) socketContext;
    int size = (int) (intptr_t) cls;
    if (toe != MHD_CONNECTION_NOTIFY_STARTED || size <= 0) return;
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info != NULL) (void) setsockopt(info->connect_fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
}

/// The daemon in external-poll mode over epoll (one descriptor for the caller's poll loop), with
/// suspend/resume, bound to `address`, with the limits given; TLS when `cert` and `key` (PEM
/// text) are both non-NULL. NULL when it cannot start (MHD logs why with MHD_USE_ERROR_LOG).
static inline struct MHD_Daemon *gattway_mhd_start(
    const struct sockaddr_in *address, unsigned int connectionLimit, size_t memoryLimit,
    unsigned int timeoutSeconds, int sendBuffer, const char *cert, const char *key, MHD_AccessHandlerCallback handler,
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
    return MHD_start_daemon(
        flags, ntohs(address->sin_port), NULL, NULL, handler, context,
        MHD_OPTION_SOCK_ADDR, (const struct sockaddr *) address,
        MHD_OPTION_CONNECTION_LIMIT, connectionLimit,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, memoryLimit,
        MHD_OPTION_CONNECTION_TIMEOUT, timeoutSeconds,
        MHD_OPTION_NOTIFY_COMPLETED, completed, context,
        MHD_OPTION_URI_LOG_CALLBACK, uriLog, context,
        MHD_OPTION_NOTIFY_CONNECTION, gattway_mhd_connection_started, (void *) (intptr_t) sendBuffer,
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
