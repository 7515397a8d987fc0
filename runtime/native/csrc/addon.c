/*
 * addon.c — the Node-API face of the native runtime. Linked with the runtime library (threads,
 * GEMM, convolution: runtime.c and friends) into one shared object that runtime/native/addon.ts
 * loads with process.dlopen. It loads kernel libraries from bytes the caller has verified
 * (libcache.ts): on Linux through an anonymous memfd, so no path exists that anyone could swap
 * between the check and the load; elsewhere through a file in a fresh private directory, removed
 * once loaded. Every failure (dlopen's message, a missing symbol, an ABI mismatch) comes back as
 * a JS Error, never a crash. Libraries stay loaded for the life of the process. callKernel runs
 * one range kernel with no allocation for up to 16 buffers, serially or on the runtime's pool.
 * Only node_api.h / js_native_api.h at NAPI_VERSION 8 (Node 20).
 */
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <node_api.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif

#include "kiln_mem.h"
#include "kiln_rt.h"

/* The runtime library's entry points (runtime.c); the header is the other half's contract. */
#if defined(__has_include)
#if __has_include("runtime_internal.h")
#include "runtime_internal.h"
#define KILN_HAVE_RUNTIME_INTERNAL 1
#endif
#endif
#ifndef KILN_HAVE_RUNTIME_INTERNAL
const KilnApi* kiln_runtime_api(void);
void kiln_set_num_threads(int n);
int kiln_get_num_threads(void);
const char* kiln_runtime_isa(void);
#endif

#define KILN_STACK_BUFFERS 16

/*
 * What a library handle (a JS External) points at. Handles live in a pool of chunks that never
 * move or shrink (libraries are never unloaded), so callKernel can tell one of its own handles
 * from any other External by address alone — no property lookup on the hot path — and an
 * External from elsewhere is refused, never dereferenced.
 */
typedef struct LoadedLibrary {
  void* dl;
  const KilnLibrary* lib;
  _Atomic int ready;
} LoadedLibrary;

#define KILN_POOL_CHUNKS 40
#define KILN_POOL_FIRST 64 /* chunk c holds KILN_POOL_FIRST << c handles */
static LoadedLibrary* _Atomic g_chunks[KILN_POOL_CHUNKS];
static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static size_t g_pool_used; /* under g_pool_mu */

static LoadedLibrary* pool_new(void) {
  pthread_mutex_lock(&g_pool_mu);
  size_t i = g_pool_used;
  LoadedLibrary* out = NULL;
  for (int c = 0; c < KILN_POOL_CHUNKS; c++) {
    size_t n = (size_t)KILN_POOL_FIRST << c;
    if (i < n) {
      LoadedLibrary* chunk = atomic_load_explicit(&g_chunks[c], memory_order_relaxed);
      if (chunk == NULL) {
        chunk = (LoadedLibrary*)calloc(n, sizeof *chunk);
        if (chunk == NULL) break;
        atomic_store_explicit(&g_chunks[c], chunk, memory_order_release);
      }
      out = &chunk[i];
      g_pool_used++;
      break;
    }
    i -= n;
  }
  pthread_mutex_unlock(&g_pool_mu);
  return out;
}

static const LoadedLibrary* pool_find(const void* p) {
  uintptr_t a = (uintptr_t)p;
  for (int c = 0; c < KILN_POOL_CHUNKS; c++) {
    const LoadedLibrary* chunk = atomic_load_explicit(&g_chunks[c], memory_order_acquire);
    if (chunk == NULL) return NULL;
    uintptr_t lo = (uintptr_t)chunk;
    uintptr_t hi = lo + ((size_t)KILN_POOL_FIRST << c) * sizeof *chunk;
    if (a >= lo && a < hi) {
      if ((a - lo) % sizeof *chunk != 0) return NULL;
      const LoadedLibrary* h = (const LoadedLibrary*)p;
      return atomic_load_explicit(&h->ready, memory_order_acquire) ? h : NULL;
    }
  }
  return NULL;
}

/* ---- Errors ------------------------------------------------------------------------------ */

static napi_value throw_error(napi_env env, const char* msg) {
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (!pending) napi_throw_error(env, NULL, msg);
  return NULL;
}

static napi_value throw_type_error(napi_env env, const char* msg) {
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (!pending) napi_throw_type_error(env, NULL, msg);
  return NULL;
}

/* A failed napi call: rethrow what it left pending, else say which call failed. */
static napi_value throw_napi(napi_env env, const char* what) {
  const napi_extended_error_info* info = NULL;
  napi_get_last_error_info(env, &info);
  char msg[256];
  snprintf(msg, sizeof msg, "kiln addon: %s failed: %s", what,
           info && info->error_message ? info->error_message : "unknown Node-API error");
  return throw_error(env, msg);
}

#define NAPI_OK(env, call, what)                     \
  do {                                               \
    if ((call) != napi_ok) return throw_napi(env, what); \
  } while (0)

/* ---- Loading a library from bytes -------------------------------------------------------- */

static int write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* dlerror()'s message without the temporary path it starts with (it names nothing useful). */
static void copy_dlerror(char* err, size_t cap, const char* path) {
  const char* e = dlerror();
  if (e == NULL) e = "dlopen failed";
  size_t n = strlen(path);
  if (strncmp(e, path, n) == 0 && e[n] == ':' && e[n + 1] == ' ') e += n + 2;
  snprintf(err, cap, "%s", e);
}

#if defined(__linux__) && defined(SYS_memfd_create)
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
/*
 * The bytes in an anonymous memfd, opened as /proc/self/fd/N. The fd stays open for the life
 * of the process: the library is never unloaded, and glibc recognises an already loaded object
 * by its name, so a reused fd number must never name a second library.
 */
static void* open_memfd(const uint8_t* bytes, size_t n, char* err, size_t cap, bool* refused) {
  /* MFD_EXEC asks for an executable memfd where vm.memfd_noexec would refuse one; kernels
   * before 6.3 reject the flag, so try without it. */
  int fd = (int)syscall(SYS_memfd_create, "kiln-library", MFD_CLOEXEC | MFD_EXEC);
  if (fd < 0 && errno == EINVAL) fd = (int)syscall(SYS_memfd_create, "kiln-library", MFD_CLOEXEC);
  if (fd < 0) {
    snprintf(err, cap, "memfd_create: %s", strerror(errno));
    *refused = true;
    return NULL;
  }
  if (write_all(fd, bytes, n) != 0) {
    snprintf(err, cap, "writing the library to a memfd: %s", strerror(errno));
    close(fd);
    return NULL;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  void* dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    copy_dlerror(err, cap, path);
    *refused = strstr(err, "failed to map segment") != NULL ||
               strstr(err, "Operation not permitted") != NULL;
    close(fd);
  }
  return dl;
}
#endif

/* The bytes in a file of a fresh private (0700) directory, removed once loaded. File names
 * are unique within the process, so no two libraries ever share one. */
static void* open_private_file(const uint8_t* bytes, size_t n, char* err, size_t cap) {
  static unsigned long counter = 0;
  const char* base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/kiln-%ld-lib-XXXXXX", base, (long)getuid());
  if (!mkdtemp(dir)) {
    snprintf(err, cap, "mkdtemp %s: %s", dir, strerror(errno));
    return NULL;
  }
  char path[1100];
  snprintf(path, sizeof path, "%s/lib-%ld-%lu.so", dir, (long)getpid(), ++counter);
  void* dl = NULL;
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0700);
  if (fd < 0) {
    snprintf(err, cap, "creating %s: %s", path, strerror(errno));
  } else {
    int w = write_all(fd, bytes, n);
    int saved = errno;
    close(fd);
    if (w != 0) {
      snprintf(err, cap, "writing %s: %s", path, strerror(saved));
    } else {
      dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (!dl) copy_dlerror(err, cap, path);
    }
    unlink(path);
  }
  rmdir(dir);
  return dl;
}

static void* open_bytes(const uint8_t* bytes, size_t n, char* err, size_t cap) {
#if defined(__linux__) && defined(SYS_memfd_create)
  bool mapping_refused = false;
  void* dl = open_memfd(bytes, n, err, cap, &mapping_refused);
  /* Only a memfd the system will not map executable (a noexec policy) is worth a second try
   * from a file; a library that is itself broken would fail there the same way. */
  if (dl || !mapping_refused) return dl;
#endif
  return open_private_file(bytes, n, err, cap);
}

/* ---- Arguments --------------------------------------------------------------------------- */

/* The data pointer and byte length of a TypedArray, DataView or ArrayBuffer (byteOffset
 * applied); false when `v` is none of them. */
static bool bytes_of(napi_env env, napi_value v, void** data, size_t* len) {
  bool is = false;
  if (napi_is_typedarray(env, v, &is) == napi_ok && is) {
    napi_typedarray_type type;
    size_t length;
    size_t offset;
    if (napi_get_typedarray_info(env, v, &type, &length, data, NULL, &offset) != napi_ok) {
      return false;
    }
    size_t elem;
    switch (type) {
      case napi_int8_array:
      case napi_uint8_array:
      case napi_uint8_clamped_array: elem = 1; break;
      case napi_int16_array:
      case napi_uint16_array: elem = 2; break;
      case napi_int32_array:
      case napi_uint32_array:
      case napi_float32_array: elem = 4; break;
      default: elem = 8; break;
    }
    *len = length * elem;
    return true;
  }
  if (napi_is_arraybuffer(env, v, &is) == napi_ok && is) {
    return napi_get_arraybuffer_info(env, v, data, len) == napi_ok;
  }
  if (napi_is_dataview(env, v, &is) == napi_ok && is) {
    size_t offset;
    return napi_get_dataview_info(env, v, len, data, NULL, &offset) == napi_ok;
  }
  return false;
}

/* callKernel's hot path: only the data pointer. A TypedArray is the common case, so it is
 * asked first, without the is-a check (a failed info call sets no exception). */
static bool pointer_of(napi_env env, napi_value v, void** data) {
  if (napi_get_typedarray_info(env, v, NULL, NULL, data, NULL, NULL) == napi_ok) return true;
  size_t len;
  return bytes_of(env, v, data, &len);
}

static const LoadedLibrary* library_of(napi_env env, napi_value v) {
  void* p = NULL;
  const LoadedLibrary* h = NULL;
  if (napi_get_value_external(env, v, &p) == napi_ok) h = pool_find(p);
  if (h == NULL) throw_type_error(env, "kiln addon: expected a library handle from loadLibrary");
  return h;
}

/* ---- info, setThreads, getThreads -------------------------------------------------------- */

static napi_value set_int(napi_env env, napi_value obj, const char* name, int64_t v) {
  napi_value x;
  if (napi_create_int64(env, v, &x) != napi_ok) return NULL;
  if (napi_set_named_property(env, obj, name, x) != napi_ok) return NULL;
  return obj;
}

static napi_value js_info(napi_env env, napi_callback_info cb) {
  (void)cb;
  napi_value obj, isa;
  NAPI_OK(env, napi_create_object(env, &obj), "info");
  if (!set_int(env, obj, "abi", KILN_ABI_VERSION)) return throw_napi(env, "info");
  const char* name = kiln_runtime_isa();
  if (name == NULL) name = "unknown";
  NAPI_OK(env, napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &isa), "info");
  NAPI_OK(env, napi_set_named_property(env, obj, "isa", isa), "info");
  if (!set_int(env, obj, "threads", kiln_get_num_threads())) return throw_napi(env, "info");
  return obj;
}

static napi_value js_set_threads(napi_env env, napi_callback_info cb) {
  size_t argc = 1;
  napi_value argv[1];
  NAPI_OK(env, napi_get_cb_info(env, cb, &argc, argv, NULL, NULL), "setThreads");
  int32_t n = 0;
  if (argc < 1 || napi_get_value_int32(env, argv[0], &n) != napi_ok || n < 0) {
    return throw_type_error(env, "setThreads(n): n must be an integer >= 0 (0: the default)");
  }
  kiln_set_num_threads(n);
  return NULL;
}

/* adviseHugePages(buffer): kiln_advise_huge over an ArrayBuffer (or view) not yet written;
 * returns the bytes advised. */
static napi_value js_advise_huge(napi_env env, napi_callback_info cb) {
  size_t argc = 1;
  napi_value argv[1];
  NAPI_OK(env, napi_get_cb_info(env, cb, &argc, argv, NULL, NULL), "adviseHugePages");
  void* data = NULL;
  size_t len = 0;
  if (argc < 1 || !bytes_of(env, argv[0], &data, &len)) {
    napi_throw_type_error(env, NULL, "adviseHugePages: expected an ArrayBuffer or a view");
    return NULL;
  }
  napi_value v;
  NAPI_OK(env, napi_create_double(env, (double)kiln_advise_huge(data, len), &v), "adviseHugePages");
  return v;
}

static napi_value js_get_threads(napi_env env, napi_callback_info cb) {
  (void)cb;
  napi_value v;
  NAPI_OK(env, napi_create_int32(env, kiln_get_num_threads(), &v), "getThreads");
  return v;
}

/* ---- loadLibrary, libraryNames ----------------------------------------------------------- */

static napi_value js_load_library(napi_env env, napi_callback_info cb) {
  size_t argc = 1;
  napi_value argv[1];
  NAPI_OK(env, napi_get_cb_info(env, cb, &argc, argv, NULL, NULL), "loadLibrary");
  void* data = NULL;
  size_t len = 0;
  if (argc < 1 || !bytes_of(env, argv[0], &data, &len)) {
    return throw_type_error(env, "loadLibrary(bytes): bytes must be a Uint8Array or ArrayBuffer");
  }
  if (len == 0) return throw_error(env, "loadLibrary: the library is empty");
  const KilnApi* api = kiln_runtime_api();
  if (api == NULL) return throw_error(env, "loadLibrary: the runtime has no API table");

  char err[1024];
  err[0] = '\0';
  void* dl = open_bytes((const uint8_t*)data, len, err, sizeof err);
  if (!dl) {
    char msg[1100];
    snprintf(msg, sizeof msg, "loadLibrary: dlopen failed: %s", err);
    return throw_error(env, msg);
  }
  dlerror();
  const KilnLibrary* lib = (const KilnLibrary*)dlsym(dl, KILN_LIBRARY_SYMBOL);
  char msg[256];
  msg[0] = '\0';
  if (lib == NULL) {
    snprintf(msg, sizeof msg, "loadLibrary: the library does not export %s", KILN_LIBRARY_SYMBOL);
  } else if (lib->abi_version != KILN_ABI_VERSION) {
    snprintf(msg, sizeof msg,
             "loadLibrary: the library is for runtime ABI %d, this runtime is ABI %d",
             lib->abi_version, KILN_ABI_VERSION);
  } else if (lib->count < 0 || (lib->count > 0 && (lib->names == NULL || lib->fns == NULL))) {
    snprintf(msg, sizeof msg, "loadLibrary: the library's kernel table is malformed (count %d)",
             lib->count);
  }
  if (msg[0] != '\0') {
    dlclose(dl);
    return throw_error(env, msg);
  }
  LoadedLibrary* h = pool_new();
  if (h == NULL) {
    dlclose(dl);
    return throw_error(env, "loadLibrary: out of memory");
  }
  h->dl = dl;
  h->lib = lib;
  if (lib->init) lib->init(api);
  atomic_store_explicit(&h->ready, 1, memory_order_release);
  napi_value ext;
  /* No finalizer: a loaded library is never unloaded (its code may be referenced anywhere). */
  NAPI_OK(env, napi_create_external(env, h, NULL, NULL, &ext), "loadLibrary");
  return ext;
}

static napi_value js_library_names(napi_env env, napi_callback_info cb) {
  size_t argc = 1;
  napi_value argv[1];
  NAPI_OK(env, napi_get_cb_info(env, cb, &argc, argv, NULL, NULL), "libraryNames");
  if (argc < 1) return throw_type_error(env, "libraryNames(handle): a handle is required");
  const LoadedLibrary* h = library_of(env, argv[0]);
  if (h == NULL) return NULL;
  napi_value arr;
  NAPI_OK(env, napi_create_array_with_length(env, (size_t)h->lib->count, &arr), "libraryNames");
  for (int i = 0; i < h->lib->count; i++) {
    const char* name = h->lib->names[i];
    napi_value s;
    NAPI_OK(env, napi_create_string_utf8(env, name ? name : "", NAPI_AUTO_LENGTH, &s),
            "libraryNames");
    NAPI_OK(env, napi_set_element(env, arr, (uint32_t)i, s), "libraryNames");
  }
  return arr;
}

/* ---- callKernel -------------------------------------------------------------------------- */

/* A kernel call over [lo, hi) as parallel_for's [0, hi - lo): the args come first, so the
 * pointer parallel_for hands back is the whole record. */
typedef struct Shifted {
  KilnArgs args;
  KilnKernelFn fn;
  int64_t lo;
} Shifted;

static void shifted_call(const KilnArgs* a, int64_t lo, int64_t hi) {
  const Shifted* s = (const Shifted*)a;
  s->fn(&s->args, s->lo + lo, s->lo + hi);
}

/* callKernel(handle, index, buffers, sizes, lo, hi, threaded[, grain]) */
static napi_value js_call_kernel(napi_env env, napi_callback_info cb) {
  size_t argc = 8;
  napi_value argv[8];
  NAPI_OK(env, napi_get_cb_info(env, cb, &argc, argv, NULL, NULL), "callKernel");
  if (argc < 7) {
    return throw_type_error(env, "callKernel(handle, index, buffers, sizes, lo, hi, threaded)");
  }
  const LoadedLibrary* h = library_of(env, argv[0]);
  if (h == NULL) return NULL;
  int32_t index = -1;
  if (napi_get_value_int32(env, argv[1], &index) != napi_ok || index < 0 ||
      index >= h->lib->count) {
    return throw_error(env, "callKernel: the kernel index is out of range");
  }
  KilnKernelFn fn = (KilnKernelFn)h->lib->fns[index];
  if (fn == NULL) return throw_error(env, "callKernel: the kernel is NULL");

  uint32_t nbuf = 0;
  bool is_array = false;
  if (napi_is_array(env, argv[2], &is_array) != napi_ok || !is_array ||
      napi_get_array_length(env, argv[2], &nbuf) != napi_ok) {
    return throw_type_error(env, "callKernel: buffers must be an array");
  }
  napi_typedarray_type stype;
  size_t nsizes = 0;
  void* sizes = NULL;
  bool is_ta = false;
  if (napi_is_typedarray(env, argv[3], &is_ta) != napi_ok || !is_ta ||
      napi_get_typedarray_info(env, argv[3], &stype, &nsizes, &sizes, NULL, NULL) != napi_ok ||
      stype != napi_bigint64_array) {
    return throw_type_error(env, "callKernel: sizes must be a BigInt64Array");
  }
  int64_t lo = 0, hi = 0;
  if (napi_get_value_int64(env, argv[4], &lo) != napi_ok ||
      napi_get_value_int64(env, argv[5], &hi) != napi_ok) {
    return throw_type_error(env, "callKernel: lo and hi must be numbers");
  }
  if (hi < lo) return throw_error(env, "callKernel: hi < lo");
  bool threaded = false;
  if (napi_get_value_bool(env, argv[6], &threaded) != napi_ok) {
    return throw_type_error(env, "callKernel: threaded must be a boolean");
  }
  int64_t grain = 1;
  if (argc >= 8) {
    napi_valuetype t;
    if (napi_typeof(env, argv[7], &t) == napi_ok && t != napi_undefined &&
        (napi_get_value_int64(env, argv[7], &grain) != napi_ok || grain < 1)) {
      return throw_type_error(env, "callKernel: grain must be an integer >= 1");
    }
  }

  void* stack[KILN_STACK_BUFFERS];
  void** bufs = stack;
  if (nbuf > KILN_STACK_BUFFERS) {
    bufs = (void**)malloc(sizeof(void*) * nbuf);
    if (bufs == NULL) return throw_error(env, "callKernel: out of memory");
  }
  for (uint32_t i = 0; i < nbuf; i++) {
    napi_value v;
    if (napi_get_element(env, argv[2], i, &v) != napi_ok || !pointer_of(env, v, &bufs[i])) {
      if (bufs != stack) free(bufs);
      char msg[128];
      snprintf(msg, sizeof msg, "callKernel: buffer %u is not a TypedArray or ArrayBuffer", i);
      return throw_type_error(env, msg);
    }
  }
  if (hi > lo) {
    if (!threaded) {
      KilnArgs a = {bufs, (const int64_t*)sizes};
      fn(&a, lo, hi);
    } else {
      const KilnApi* api = kiln_runtime_api();
      Shifted s = {{bufs, (const int64_t*)sizes}, fn, lo};
      api->parallel_for(shifted_call, &s.args, hi - lo, grain);
    }
  }
  if (bufs != stack) free(bufs);
  return NULL;
}

/* ==== Programs: createProgram / runProgram ==================================================
 * The step-list interpreter is program.c; these are its Node-API faces.
 * createProgram(code: BigInt64Array, libs: External[], indices: Int32Array, consts:
 * TypedArray[]) → an External program (freed when collected); kernel i of the program is
 * kernel indices[i] of library libs[i]. runProgram(program, params: TypedArray[], results:
 * TypedArray[]) runs its ENTRY on the parameters' leaves, writing the result buffers.
 * ============================================================================================ */

#include "program.h"

static void program_finalize(napi_env env, void* data, void* hint) {
  (void)env;
  (void)hint;
  kiln_program_free((KilnProgram*)data);
}

static napi_value js_create_program(napi_env env, napi_callback_info cb) {
  size_t argc = 4;
  napi_value argv[4];
  NAPI_OK(env, napi_get_cb_info(env, cb, &argc, argv, NULL, NULL), "createProgram");
  if (argc < 4) return throw_type_error(env, "createProgram(code, libs, indices, consts)");
  napi_typedarray_type t;
  size_t ncode = 0, nidx = 0;
  void* code = NULL;
  void* idx = NULL;
  bool ok = false;
  if (napi_is_typedarray(env, argv[0], &ok) != napi_ok || !ok ||
      napi_get_typedarray_info(env, argv[0], &t, &ncode, &code, NULL, NULL) != napi_ok ||
      t != napi_bigint64_array) {
    return throw_type_error(env, "createProgram: code must be a BigInt64Array");
  }
  if (napi_is_typedarray(env, argv[2], &ok) != napi_ok || !ok ||
      napi_get_typedarray_info(env, argv[2], &t, &nidx, &idx, NULL, NULL) != napi_ok ||
      t != napi_int32_array) {
    return throw_type_error(env, "createProgram: indices must be an Int32Array");
  }
  uint32_t nlibs = 0, nconsts = 0;
  if (napi_get_array_length(env, argv[1], &nlibs) != napi_ok || nlibs != nidx) {
    return throw_type_error(env, "createProgram: libs and indices must have one length");
  }
  if (napi_get_array_length(env, argv[3], &nconsts) != napi_ok) {
    return throw_type_error(env, "createProgram: consts must be an array");
  }
  void** fns = (void**)calloc(nlibs > 0 ? nlibs : 1, sizeof(void*));
  const void** cptr = (const void**)calloc(nconsts > 0 ? nconsts : 1, sizeof(void*));
  int64_t* cbytes = (int64_t*)calloc(nconsts > 0 ? nconsts : 1, sizeof(int64_t));
  if (fns == NULL || cptr == NULL || cbytes == NULL) {
    free(fns);
    free(cptr);
    free(cbytes);
    return throw_error(env, "createProgram: out of memory");
  }
  const int32_t* indices = (const int32_t*)idx;
  for (uint32_t i = 0; i < nlibs; i++) {
    napi_value v;
    const LoadedLibrary* h = NULL;
    if (napi_get_element(env, argv[1], i, &v) == napi_ok) h = library_of(env, v);
    if (h == NULL || indices[i] < 0 || indices[i] >= h->lib->count) {
      free(fns);
      free(cptr);
      free(cbytes);
      return h == NULL ? NULL : throw_error(env, "createProgram: a kernel index is out of range");
    }
    fns[i] = (void*)h->lib->fns[indices[i]];
  }
  for (uint32_t i = 0; i < nconsts; i++) {
    napi_value v;
    void* data = NULL;
    size_t len = 0;
    if (napi_get_element(env, argv[3], i, &v) != napi_ok || !bytes_of(env, v, &data, &len)) {
      free(fns);
      free(cptr);
      free(cbytes);
      return throw_type_error(env, "createProgram: a constant is not a TypedArray");
    }
    cptr[i] = data;
    cbytes[i] = (int64_t)len;
  }
  char err[256] = {0};
  KilnProgram* prog = kiln_program_create((const int64_t*)code, (int64_t)ncode, fns, nlibs,
                                          cptr, cbytes, nconsts, err, sizeof err);
  free(fns);
  free(cptr);
  free(cbytes);
  if (prog == NULL) return throw_error(env, err);
  napi_value ext;
  if (napi_create_external(env, prog, program_finalize, NULL, &ext) != napi_ok) {
    kiln_program_free(prog);
    return throw_napi(env, "createProgram");
  }
  return ext;
}

static napi_value js_run_program(napi_env env, napi_callback_info cb) {
  size_t argc = 3;
  napi_value argv[3];
  NAPI_OK(env, napi_get_cb_info(env, cb, &argc, argv, NULL, NULL), "runProgram");
  if (argc < 3) return throw_type_error(env, "runProgram(program, params, results)");
  void* pv = NULL;
  if (napi_get_value_external(env, argv[0], &pv) != napi_ok || pv == NULL) {
    return throw_type_error(env, "runProgram: not a program");
  }
  uint32_t np = 0, nr = 0;
  if (napi_get_array_length(env, argv[1], &np) != napi_ok ||
      napi_get_array_length(env, argv[2], &nr) != napi_ok) {
    return throw_type_error(env, "runProgram: params and results must be arrays");
  }
  void* stack[2 * KILN_STACK_BUFFERS];
  void** bufs = stack;
  if (np + nr > 2 * KILN_STACK_BUFFERS) {
    bufs = (void**)malloc(sizeof(void*) * (np + nr));
    if (bufs == NULL) return throw_error(env, "runProgram: out of memory");
  }
  for (uint32_t i = 0; i < np + nr; i++) {
    napi_value v;
    napi_value arr = i < np ? argv[1] : argv[2];
    uint32_t k = i < np ? i : i - np;
    if (napi_get_element(env, arr, k, &v) != napi_ok || !pointer_of(env, v, &bufs[i])) {
      if (bufs != stack) free(bufs);
      return throw_type_error(env, "runProgram: a buffer is not a TypedArray");
    }
  }
  char err[256] = {0};
  int rc = kiln_program_run((KilnProgram*)pv, bufs, np, bufs + np, nr, err, sizeof err);
  if (bufs != stack) free(bufs);
  if (rc != 0) return throw_error(env, err);
  return NULL;
}

/* programProfile(program) → [seconds: Float64Array, calls: BigInt64Array] per step id, or
 * undefined when the program was created without KILN_NATIVE_PROFILE=1. */
static napi_value js_program_profile(napi_env env, napi_callback_info cb) {
  size_t argc = 1;
  napi_value argv[1];
  NAPI_OK(env, napi_get_cb_info(env, cb, &argc, argv, NULL, NULL), "programProfile");
  void* pv = NULL;
  if (argc < 1 || napi_get_value_external(env, argv[0], &pv) != napi_ok || pv == NULL) {
    return throw_type_error(env, "programProfile: not a program");
  }
  enum { CAP = 1 << 16 };
  static double secs[CAP];
  static int64_t calls[CAP];
  int64_t n = kiln_program_profile((const KilnProgram*)pv, secs, calls, CAP);
  if (n == 0) return NULL;
  napi_value ab1, ab2, f64, i64, arr;
  void* d1 = NULL;
  void* d2 = NULL;
  NAPI_OK(env, napi_create_arraybuffer(env, (size_t)n * 8, &d1, &ab1), "programProfile");
  NAPI_OK(env, napi_create_arraybuffer(env, (size_t)n * 8, &d2, &ab2), "programProfile");
  memcpy(d1, secs, (size_t)n * 8);
  memcpy(d2, calls, (size_t)n * 8);
  NAPI_OK(env, napi_create_typedarray(env, napi_float64_array, (size_t)n, ab1, 0, &f64),
          "programProfile");
  NAPI_OK(env, napi_create_typedarray(env, napi_bigint64_array, (size_t)n, ab2, 0, &i64),
          "programProfile");
  NAPI_OK(env, napi_create_array_with_length(env, 2, &arr), "programProfile");
  NAPI_OK(env, napi_set_element(env, arr, 0, f64), "programProfile");
  NAPI_OK(env, napi_set_element(env, arr, 1, i64), "programProfile");
  return arr;
}

/* ---- Module ------------------------------------------------------------------------------ */

NAPI_MODULE_INIT() {
  static const napi_property_descriptor kExports[] = {
      {"info", NULL, js_info, NULL, NULL, NULL, napi_enumerable, NULL},
      {"setThreads", NULL, js_set_threads, NULL, NULL, NULL, napi_enumerable, NULL},
      {"getThreads", NULL, js_get_threads, NULL, NULL, NULL, napi_enumerable, NULL},
      {"adviseHugePages", NULL, js_advise_huge, NULL, NULL, NULL, napi_enumerable, NULL},
      {"loadLibrary", NULL, js_load_library, NULL, NULL, NULL, napi_enumerable, NULL},
      {"libraryNames", NULL, js_library_names, NULL, NULL, NULL, napi_enumerable, NULL},
      {"callKernel", NULL, js_call_kernel, NULL, NULL, NULL, napi_enumerable, NULL},
      {"createProgram", NULL, js_create_program, NULL, NULL, NULL, napi_enumerable, NULL},
      {"runProgram", NULL, js_run_program, NULL, NULL, NULL, napi_enumerable, NULL},
      {"programProfile", NULL, js_program_profile, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  if (napi_define_properties(env, exports, sizeof kExports / sizeof kExports[0], kExports) !=
      napi_ok) {
    return NULL;
  }
  return exports;
}
