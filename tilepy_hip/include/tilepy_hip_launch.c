/* tilepy_hip's launch hot path in C (built on first use by tilepy_hip/native.py with the system C compiler; the
 * driver is found with dlopen, so the build needs no CUDA headers or libraries; without one the module loads,
 * and launching raises RuntimeError).
 *
 *   launch(func, gx, gy, gz, block_x, shared_bytes, stream, params) -> CUresult
 *       cuLaunchKernel with ints for handles and addresses (`params`: the address of a prepared void *params[]).
 *
 *   fast(entries, kinds, target, kwargs, args, grid, stream) -> the entry's result, or None (not found)
 *       The same lookup as prepared.fast_path's generated Python: builds the signature key of the call
 *       (target, len(kwargs), *kwargs.items(), per kind 't' tensor: dtype, shape, get_device(), is_contiguous();
 *       's' scalar: type; 'c' constexpr: the value; then args[len(kinds):]) and looks it up in `entries`. An entry
 *       is PreparedLaunch.record(): (call, ck, simple, func, threads, smem, params, index, stream_fn, grids, meta,
 *       slots). For a simple entry (tensor pointers only, one device) this function fills the pointer slots and
 *       launches; otherwise, for a grid not seen yet, or when the launch fails, it returns call(grid, args,
 *       stream), the Python path, which handles (and reports) everything.
 *
 *   bound_fast(package, own, entries, kinds, grid, target, kwargs, args[, stream]) -> as fast, or None
 *       The kernel's whole fast path (`Kernel.gpu_launch` is a functools.partial of it over the first four):
 *       None while `package.launch` is not `own` (a wrapper of tilepy_hip.launch must see every call), else
 *       fast(entries, kinds, target, kwargs, args, grid, stream). One C call, no Python frame in between. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>

typedef int (*cu_launch_kernel_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  void *, void **, void **);
static cu_launch_kernel_t cu_launch_kernel;
static PyObject *s_dtype, *s_shape, *s_get_device, *s_is_contiguous, *s_data_ptr, *s_launch;

typedef struct {
  void **addr;    /* where the pointer goes (a ctypes c_void_p of the argument buffer) */
  Py_ssize_t pos; /* which positional argument's data_ptr() */
} slot_t;

static PyObject *no_driver(void) {
  PyErr_SetString(PyExc_RuntimeError, "libcuda.so.1 (cuLaunchKernel) was not found when tilepy_hip_launch loaded");
  return NULL;
}

static PyObject *driver_found(PyObject *self, PyObject *unused) {
  (void)self, (void)unused;
  return PyBool_FromLong(cu_launch_kernel != NULL);
}

static PyObject *launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 8) {
    PyErr_SetString(PyExc_TypeError, "launch(func, gx, gy, gz, block_x, shared_bytes, stream, params)");
    return NULL;
  }
  if (cu_launch_kernel == NULL) return no_driver();
  void *func = PyLong_AsVoidPtr(args[0]);
  unsigned long gx = PyLong_AsUnsignedLong(args[1]);
  unsigned long gy = PyLong_AsUnsignedLong(args[2]);
  unsigned long gz = PyLong_AsUnsignedLong(args[3]);
  unsigned long bx = PyLong_AsUnsignedLong(args[4]);
  unsigned long smem = PyLong_AsUnsignedLong(args[5]);
  void *stream = PyLong_AsVoidPtr(args[6]);
  void **params = (void **)PyLong_AsVoidPtr(args[7]);
  if (PyErr_Occurred()) return NULL;
  int rc = cu_launch_kernel(func, (unsigned)gx, (unsigned)gy, (unsigned)gz, (unsigned)bx, 1, 1, (unsigned)smem,
                            stream, params, NULL);
  return PyLong_FromLong(rc);
}

/* The signature key of a call, or NULL with no error set when the call cannot have one (too few arguments, a
 * non-tensor where a tensor belongs, an unhashable value: the slow path reports those). */
static PyObject *signature_key(PyObject *kinds, PyObject *target, PyObject *kwargs, PyObject *args) {
  Py_ssize_t nk = PyBytes_GET_SIZE(kinds), nargs = PyTuple_GET_SIZE(args), nkw = PyDict_GET_SIZE(kwargs);
  const char *k = PyBytes_AS_STRING(kinds);
  if (nargs < nk) return NULL;
  Py_ssize_t size = 3 + nkw;
  for (Py_ssize_t i = 0; i < nk; i++) size += k[i] == 't' ? 4 : 1;
  PyObject *key = PyTuple_New(size);
  if (key == NULL) return NULL;
  Py_ssize_t j = 0;
  Py_INCREF(target);
  PyTuple_SET_ITEM(key, j++, target);
  PyTuple_SET_ITEM(key, j++, PyLong_FromSsize_t(nkw));
  Py_ssize_t pos = 0;
  PyObject *name, *value;
  while (PyDict_Next(kwargs, &pos, &name, &value)) {
    PyObject *item = PyTuple_Pack(2, name, value);
    if (item == NULL) goto fail;
    PyTuple_SET_ITEM(key, j++, item);
  }
  for (Py_ssize_t i = 0; i < nk; i++) {
    PyObject *a = PyTuple_GET_ITEM(args, i);
    if (k[i] == 't') {
      PyObject *v;
      if ((v = PyObject_GetAttr(a, s_dtype)) == NULL) goto fail;
      PyTuple_SET_ITEM(key, j++, v);
      if ((v = PyObject_GetAttr(a, s_shape)) == NULL) goto fail;
      PyTuple_SET_ITEM(key, j++, v);
      if ((v = PyObject_CallMethodNoArgs(a, s_get_device)) == NULL) goto fail;
      PyTuple_SET_ITEM(key, j++, v);
      if ((v = PyObject_CallMethodNoArgs(a, s_is_contiguous)) == NULL) goto fail;
      PyTuple_SET_ITEM(key, j++, v);
    } else if (k[i] == 's') {
      Py_INCREF((PyObject *)Py_TYPE(a));
      PyTuple_SET_ITEM(key, j++, (PyObject *)Py_TYPE(a));
    } else {
      Py_INCREF(a);
      PyTuple_SET_ITEM(key, j++, a);
    }
  }
  PyObject *rest = PyTuple_GetSlice(args, nk, nargs);
  if (rest == NULL) goto fail;
  PyTuple_SET_ITEM(key, j++, rest);
  return key;
fail:
  Py_DECREF(key); /* unset items are NULL, which tuple deallocation skips */
  PyErr_Clear();
  return NULL;
}

static PyObject *python_path(PyObject *call, PyObject *grid, PyObject *args, PyObject *stream) {
  PyObject *argv[3] = {grid, args, stream};
  return PyObject_Vectorcall(call, argv, 3, NULL);
}

static PyObject *fast_impl(PyObject *entries, PyObject *kinds, PyObject *target, PyObject *kwargs,
                           PyObject *args, PyObject *grid, PyObject *stream) {
  PyObject *key = signature_key(kinds, target, kwargs, args);
  if (key == NULL) Py_RETURN_NONE;
  PyObject *entry = PyDict_GetItemWithError(entries, key); /* borrowed */
  Py_DECREF(key);
  if (entry == NULL) {
    PyErr_Clear();
    Py_RETURN_NONE;
  }
  if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 12) {
    PyErr_SetString(PyExc_TypeError, "a prepared launch record has 12 fields");
    return NULL;
  }
  PyObject *call = PyTuple_GET_ITEM(entry, 0), *ck = PyTuple_GET_ITEM(entry, 1);
  if (!PyObject_IsTrue(PyTuple_GET_ITEM(entry, 2))) return python_path(call, grid, args, stream);
  PyObject *grids = PyTuple_GET_ITEM(entry, 9), *dims, *resolved = NULL;
  if (PyCallable_Check(grid)) {
    PyObject *meta = PyDict_Copy(PyTuple_GET_ITEM(entry, 10));
    if (meta == NULL) return NULL;
    resolved = PyObject_CallOneArg(grid, meta);
    Py_DECREF(meta);
    if (resolved == NULL) return NULL; /* the grid function's own error */
    dims = PyDict_GetItemWithError(grids, resolved);
  } else {
    dims = PyDict_GetItemWithError(grids, grid);
  }
  if (dims == NULL || !PyTuple_CheckExact(dims) || PyTuple_GET_SIZE(dims) != 3) {
    /* a grid not seen yet (the Python path normalizes and caches it), an empty one (None), an unhashable one */
    PyErr_Clear();
    PyObject *g = resolved != NULL ? resolved : grid;
    PyObject *out = python_path(call, g, args, stream);
    Py_XDECREF(resolved);
    return out;
  }
  Py_INCREF(dims);
  Py_XDECREF(resolved);
  unsigned long gx = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(dims, 0));
  unsigned long gy = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(dims, 1));
  unsigned long gz = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(dims, 2));
  Py_DECREF(dims);
  void *func = PyLong_AsVoidPtr(PyTuple_GET_ITEM(entry, 3));
  unsigned long threads = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(entry, 4));
  unsigned long smem = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(entry, 5));
  void **params = (void **)PyLong_AsVoidPtr(PyTuple_GET_ITEM(entry, 6));
  if (PyErr_Occurred()) return NULL;
  PyObject *slots = PyTuple_GET_ITEM(entry, 11);
  const slot_t *slot = (const slot_t *)PyBytes_AS_STRING(slots);
  Py_ssize_t nslots = PyBytes_GET_SIZE(slots) / (Py_ssize_t)sizeof(slot_t);
  for (Py_ssize_t i = 0; i < nslots; i++) {
    PyObject *p = PyObject_CallMethodNoArgs(PyTuple_GET_ITEM(args, slot[i].pos), s_data_ptr);
    if (p == NULL) return NULL;
    void *ptr = PyLong_AsVoidPtr(p);
    Py_DECREF(p);
    if (ptr == NULL && PyErr_Occurred()) return NULL;
    *slot[i].addr = ptr;
  }
  void *raw_stream;
  if (stream == Py_None) {
    PyObject *s = PyObject_CallOneArg(PyTuple_GET_ITEM(entry, 8), PyTuple_GET_ITEM(entry, 7));
    if (s == NULL) return NULL;
    raw_stream = PyLong_AsVoidPtr(s);
    Py_DECREF(s);
  } else {
    raw_stream = PyLong_AsVoidPtr(stream);
  }
  if (PyErr_Occurred()) return NULL;
  if (cu_launch_kernel == NULL) return no_driver();
  int rc = cu_launch_kernel(func, (unsigned)gx, (unsigned)gy, (unsigned)gz, (unsigned)threads, 1, 1,
                            (unsigned)smem, raw_stream, params, NULL);
  if (rc != 0) return python_path(call, grid, args, stream); /* retries or raises with the driver's message */
  Py_INCREF(ck);
  return ck;
}

static PyObject *fast(PyObject *self, PyObject *const *a, Py_ssize_t n) {
  (void)self;
  if (n != 7 || !PyDict_CheckExact(a[0]) || !PyBytes_CheckExact(a[1]) || !PyDict_Check(a[3]) ||
      !PyTuple_CheckExact(a[4])) {
    PyErr_SetString(PyExc_TypeError, "fast(entries, kinds, target, kwargs, args, grid, stream)");
    return NULL;
  }
  return fast_impl(a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
}

static PyObject *bound_fast(PyObject *self, PyObject *const *a, Py_ssize_t n) {
  (void)self;
  if ((n != 8 && n != 9) || !PyDict_CheckExact(a[2]) || !PyBytes_CheckExact(a[3]) || !PyDict_Check(a[6]) ||
      !PyTuple_CheckExact(a[7])) {
    PyErr_SetString(PyExc_TypeError, "bound_fast(package, own, entries, kinds, grid, target, kwargs, args[, stream])");
    return NULL;
  }
  PyObject *current = PyObject_GetAttr(a[0], s_launch);
  if (current == NULL) return NULL;
  int wrapped = current != a[1];
  Py_DECREF(current);
  if (wrapped) Py_RETURN_NONE;
  return fast_impl(a[2], a[3], a[5], a[6], a[7], a[4], n == 9 ? a[8] : Py_None);
}

static PyMethodDef methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL, "cuLaunchKernel(func, grid, block, ...)"},
    {"fast", (PyCFunction)(void (*)(void))fast, METH_FASTCALL, "the prepared launch of a call's signature"},
    {"bound_fast", (PyCFunction)(void (*)(void))bound_fast, METH_FASTCALL, "fast, unless tilepy_hip.launch is wrapped"},
    {"driver_found", driver_found, METH_NOARGS, "whether libcuda.so.1 was found"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tilepy_hip_launch", NULL, -1, methods};

PyMODINIT_FUNC PyInit_tilepy_hip_launch(void) {
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  cu_launch_kernel = driver ? (cu_launch_kernel_t)dlsym(driver, "cuLaunchKernel") : NULL; /* checked per call */
  s_dtype = PyUnicode_InternFromString("dtype");
  s_shape = PyUnicode_InternFromString("shape");
  s_get_device = PyUnicode_InternFromString("get_device");
  s_is_contiguous = PyUnicode_InternFromString("is_contiguous");
  s_data_ptr = PyUnicode_InternFromString("data_ptr");
  s_launch = PyUnicode_InternFromString("launch");
  if (!s_dtype || !s_shape || !s_get_device || !s_is_contiguous || !s_data_ptr || !s_launch) return NULL;
  return PyModule_Create(&module);
}
