#ifndef GATTWAY_CMICROHTTPD_SHIM_H
#define GATTWAY_CMICROHTTPD_SHIM_H
// libmicrohttpd, loaded when the web server first needs it (dlopen), not linked: with it come
// GnuTLS and its eight libraries, some 3.5 MB resident that a gateway nobody visits would carry
// (docs/web.md, "Memory"). Its types come from its header; every call goes through a wrapper
// below (gattway_MHD_…), which finds the function in the loaded library once. Non-variadic
// wrappers of its variadic calls too (Swift cannot call a C variadic function).
#include <dlfcn.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <microhttpd.h>

/// The library's handle: loaded at the first call (RTLD_NOW: a missing symbol shows at once);
/// NULL when it cannot be (dlerror says why). Every caller gets the same handle from the
/// dynamic linker, so a copy of this function per file is harmless.
static inline void *gattway_mhd_library(void) {
    static void *handle;
    if (handle == NULL) handle = dlopen("libmicrohttpd.so.12", RTLD_NOW | RTLD_LOCAL);
    return handle;
}

/// Resolves `name` once into a local `fn` of its own type (the loop thread is the only caller).
#define GATTWAY_MHD_FUNCTION(name) \
    static __typeof__(&name) fn; \
    if (fn == NULL) fn = (__typeof__(&name)) dlsym(gattway_mhd_library(), #name)

#define GATTWAY_MHD_FUNCTIONS(X) \
    X(MHD_start_daemon) X(MHD_stop_daemon) X(MHD_run) X(MHD_get_timeout) X(MHD_get_daemon_info) \
    X(MHD_get_connection_info) X(MHD_get_connection_values) X(MHD_queue_response) \
    X(MHD_create_response_from_buffer) X(MHD_create_response_from_callback) X(MHD_destroy_response) \
    X(MHD_add_response_header) X(MHD_suspend_connection) X(MHD_resume_connection) \
    X(MHD_is_feature_supported)

/// Loads the library and checks that it has every function used here: NULL when it does, else
/// why not (dlerror's text, or the missing function's name). Call it before any other wrapper.
static inline const char *gattway_mhd_load(void) {
    void *handle = gattway_mhd_library();
    if (handle == NULL) {
        const char *error = dlerror();
        return error != NULL ? error : "libmicrohttpd.so.12 could not be loaded";
    }
#define GATTWAY_MHD_CHECK(name) if (dlsym(handle, #name) == NULL) return #name " is missing from libmicrohttpd.so.12";
    GATTWAY_MHD_FUNCTIONS(GATTWAY_MHD_CHECK)
#undef GATTWAY_MHD_CHECK
    return NULL;
}

/// Whether libmicrohttpd is in the process now (loaded by gattway_mhd_load, or by anyone).
static inline int gattway_mhd_is_loaded(void) {
    void *handle = dlopen("libmicrohttpd.so.12", RTLD_NOW | RTLD_NOLOAD);
    if (handle == NULL) return 0;
    dlclose(handle);
    return 1;
}

static inline enum MHD_Result gattway_MHD_run(struct MHD_Daemon *daemon) {
    GATTWAY_MHD_FUNCTION(MHD_run);
    return fn(daemon);
}

static inline void gattway_MHD_stop_daemon(struct MHD_Daemon *daemon) {
    GATTWAY_MHD_FUNCTION(MHD_stop_daemon);
    fn(daemon);
}

static inline enum MHD_Result gattway_MHD_get_timeout(struct MHD_Daemon *daemon, MHD_UNSIGNED_LONG_LONG *timeout) {
    GATTWAY_MHD_FUNCTION(MHD_get_timeout);
    return fn(daemon, timeout);
}

static inline int gattway_MHD_get_connection_values(
    struct MHD_Connection *connection, enum MHD_ValueKind kind, MHD_KeyValueIterator iterator, void *cls)
{
    GATTWAY_MHD_FUNCTION(MHD_get_connection_values);
    return fn(connection, kind, iterator, cls);
}

static inline enum MHD_Result gattway_MHD_queue_response(
    struct MHD_Connection *connection, unsigned int status, struct MHD_Response *response)
{
    GATTWAY_MHD_FUNCTION(MHD_queue_response);
    return fn(connection, status, response);
}

static inline struct MHD_Response *gattway_MHD_create_response_from_buffer(
    size_t size, void *buffer, enum MHD_ResponseMemoryMode mode)
{
    GATTWAY_MHD_FUNCTION(MHD_create_response_from_buffer);
    return fn(size, buffer, mode);
}

static inline struct MHD_Response *gattway_MHD_create_response_from_callback(
    uint64_t size, size_t blockSize, MHD_ContentReaderCallback reader, void *cls, MHD_ContentReaderFreeCallback freed)
{
    GATTWAY_MHD_FUNCTION(MHD_create_response_from_callback);
    return fn(size, blockSize, reader, cls, freed);
}

static inline void gattway_MHD_destroy_response(struct MHD_Response *response) {
    GATTWAY_MHD_FUNCTION(MHD_destroy_response);
    fn(response);
}

static inline enum MHD_Result gattway_MHD_add_response_header(
    struct MHD_Response *response, const char *name, const char *value)
{
    GATTWAY_MHD_FUNCTION(MHD_add_response_header);
    return fn(response, name, value);
}

static inline void gattway_MHD_suspend_connection(struct MHD_Connection *connection) {
    GATTWAY_MHD_FUNCTION(MHD_suspend_connection);
    fn(connection);
}

static inline void gattway_MHD_resume_connection(struct MHD_Connection *connection) {
    GATTWAY_MHD_FUNCTION(MHD_resume_connection);
    fn(connection);
}

static inline enum MHD_Result gattway_MHD_is_feature_supported(enum MHD_FEATURE feature) {
    GATTWAY_MHD_FUNCTION(MHD_is_feature_supported);
    return fn(feature);
}

static inline const union MHD_ConnectionInfo *gattway_mhd_connection_info(
    struct MHD_Connection *connection, enum MHD_ConnectionInfoType type)
{
    GATTWAY_MHD_FUNCTION(MHD_get_connection_info);
    return fn(connection, type);
}

static inline const union MHD_DaemonInfo *gattway_mhd_daemon_info(struct MHD_Daemon *daemon, enum MHD_DaemonInfoType type) {
    GATTWAY_MHD_FUNCTION(MHD_get_daemon_info);
    return fn(daemon, type);
}

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
    const union MHD_ConnectionInfo *info = gattway_mhd_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
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
/// suspend/resume, serving `listenSocket` (bound and listening: the caller made it), with the
/// limits given; TLS when `cert` and `key` (PEM text) are both non-NULL. NULL when it cannot start
/// (MHD logs why with MHD_USE_ERROR_LOG). Call gattway_mhd_load first.
static inline struct MHD_Daemon *gattway_mhd_start(
    int listenSocket, struct gattway_mhd_limit *limit, size_t memoryLimit,
    unsigned int timeoutSeconds, const char *cert, const char *key, MHD_AccessHandlerCallback handler,
    void *context, MHD_RequestCompletedCallback completed, void *(*uriLog)(void *, const char *, struct MHD_Connection *))
{
    GATTWAY_MHD_FUNCTION(MHD_start_daemon);
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
    return fn(
        flags, 0, gattway_mhd_accept, limit, handler, context,
        MHD_OPTION_LISTEN_SOCKET, listenSocket,
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
    const union MHD_DaemonInfo *info = gattway_mhd_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
    return info == NULL ? -1 : info->epoll_fd;
}

/// Connections open now.
static inline unsigned int gattway_mhd_connections(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = gattway_mhd_daemon_info(daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return info == NULL ? 0 : info->num_connections;
}

/// A connection's socket; -1 when unknown.
static inline int gattway_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = gattway_mhd_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}
#endif
