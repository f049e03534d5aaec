/* Optional compiled line scanner for the journal search (see journal_plans.py).
 *
 * find_lines(buf, needle, lo, text_only, escapes) returns, in ascending order, the start
 * offsets of the lines of buf[lo:] (lo is a line start) holding `needle` under ASCII case
 * folding, exactly the lines the pure-Python plans find with bytes.lower() and bytes.find (the
 * caller passes a lower-case ASCII needle without a newline). With text_only, an occurrence
 * counts only past the start of the line that strip_skeleton() in journal_plans.py removes
 * (our own layout, up to where the text value begins); lines not in that layout are searched
 * whole, as there. Lines holding a backslash followed by a byte of `escapes` are added: the
 * JSON escapes that may stand for part of a match (_Needle._extra_hits in journal_plans.py).
 *
 * The scan runs without the GIL: `buf` is an immutable bytes object the caller keeps alive.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static unsigned char fold[256];

/* The last newline in [p, end), or NULL. */
static const unsigned char *
last_newline(const unsigned char *p, const unsigned char *end)
{
#if defined(__GLIBC__)
    return memrchr(p, '\n', (size_t)(end - p));
#else
    while (end > p) {
        if (*--end == '\n') {
            return end;
        }
    }
    return NULL;
#endif
}

/* Whether the `n` bytes at `p`, folded, equal the lower-case `s`. */
static int
folded_equal(const unsigned char *p, const unsigned char *s, Py_ssize_t n)
{
    for (Py_ssize_t k = 0; k < n; k++) {
        if (fold[p[k]] != s[k]) {
            return 0;
        }
    }
    return 1;
}

#if defined(__SSE2__)
/* The first and last bytes of a needle, 16 times over, for testing 16 starts at once. For a
 * lower-case letter c, (b | 0x20) == c holds exactly for b in {c, C}; other bytes are compared
 * as they are, as bytes.lower() leaves them. */
typedef struct {
    __m128i first, last, first_or, last_or;
} pair_filter;

static pair_filter
pair_filter_for(const unsigned char *needle, Py_ssize_t m)
{
    const unsigned char first = needle[0], last = needle[m - 1];
    pair_filter f;
    f.first = _mm_set1_epi8((char)first);
    f.last = _mm_set1_epi8((char)last);
    f.first_or = _mm_set1_epi8((char)((first >= 'a' && first <= 'z') ? 0x20 : 0));
    f.last_or = _mm_set1_epi8((char)((last >= 'a' && last <= 'z') ? 0x20 : 0));
    return f;
}

/* Bit k set: the needle's first and last bytes match, folded, for a start at p + k. */
static inline unsigned int
pair_mask(const pair_filter *f, __m128i raw, const unsigned char *p, Py_ssize_t m)
{
    __m128i a = _mm_or_si128(raw, f->first_or);
    __m128i b = _mm_or_si128(_mm_loadu_si128((const __m128i *)(p + m - 1)), f->last_or);
    return (unsigned int)_mm_movemask_epi8(
        _mm_and_si128(_mm_cmpeq_epi8(a, f->first), _mm_cmpeq_epi8(b, f->last)));
}
#endif

/* The first folded occurrence of the m-byte `needle` in [p, end), or NULL. */
static const unsigned char *
find_folded(const unsigned char *p, const unsigned char *end, const unsigned char *needle,
            Py_ssize_t m)
{
    const unsigned char first = needle[0], last = needle[m - 1];
    if (end - p < m) {
        return NULL;
    }
    const unsigned char *stop = end - m + 1; /* candidate starts lie in [p, stop) */
#if defined(__SSE2__)
    const pair_filter filter = pair_filter_for(needle, m);
    while (stop - p >= 16) {
        unsigned int mask = pair_mask(&filter, _mm_loadu_si128((const __m128i *)p), p, m);
        while (mask) {
            int bit = __builtin_ctz(mask);
            if (m <= 2 || folded_equal(p + bit + 1, needle + 1, m - 2)) {
                return p + bit;
            }
            mask &= mask - 1;
        }
        p += 16;
    }
#endif
    for (; p < stop; p++) {
        if (fold[*p] == first && fold[p[m - 1]] == last && folded_equal(p, needle, m)) {
            return p;
        }
    }
    return NULL;
}

/* Whether the line that goes on at `p` holds the m-byte `needle` (folded) before its newline
 * (or `end`); `*line_end` is set to that newline or `end`. One pass over the line. */
static int
find_in_line(const unsigned char *p, const unsigned char *end, const unsigned char *needle,
             Py_ssize_t m, const unsigned char **line_end)
{
    const unsigned char first = needle[0];
#if defined(__SSE2__)
    const pair_filter filter = pair_filter_for(needle, m);
    const __m128i vnl = _mm_set1_epi8('\n');
    while (end - p >= 16 + m - 1) {
        __m128i raw = _mm_loadu_si128((const __m128i *)p);
        unsigned int cand = pair_mask(&filter, raw, p, m);
        unsigned int nl = (unsigned int)_mm_movemask_epi8(_mm_cmpeq_epi8(raw, vnl));
        if (nl) {
            /* Only candidates starting before the newline belong to this line. */
            cand &= (nl & -nl) - 1;
        }
        while (cand) {
            int bit = __builtin_ctz(cand);
            if (m <= 2 || folded_equal(p + bit + 1, needle + 1, m - 2)) {
                const unsigned char *stop = memchr(p + bit, '\n', (size_t)(end - p - bit));
                *line_end = stop ? stop : end;
                return 1;
            }
            cand &= cand - 1;
        }
        if (nl) {
            *line_end = p + __builtin_ctz(nl);
            return 0;
        }
        p += 16;
    }
#endif
    for (; p < end && *p != '\n'; p++) {
        if (fold[*p] == first && end - p >= m && folded_equal(p, needle, m)) {
            const unsigned char *stop = memchr(p, '\n', (size_t)(end - p));
            *line_end = stop ? stop : end;
            return 1;
        }
    }
    *line_end = p;
    return 0;
}

/* The first byte in [p, end) that is one of `a`, `b`, `c`, or `end`. */
static const unsigned char *
find_any3(const unsigned char *p, const unsigned char *end, unsigned char a, unsigned char b,
          unsigned char c)
{
#if defined(__SSE2__)
    const __m128i va = _mm_set1_epi8((char)a), vb = _mm_set1_epi8((char)b);
    const __m128i vc = _mm_set1_epi8((char)c);
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        unsigned int mask = (unsigned int)_mm_movemask_epi8(_mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(v, va), _mm_cmpeq_epi8(v, vb)), _mm_cmpeq_epi8(v, vc)));
        if (mask) {
            return p + __builtin_ctz(mask);
        }
        p += 16;
    }
#endif
    while (p < end && *p != a && *p != b && *p != c) {
        p++;
    }
    return p;
}

/* Whether the bytes at [p, end) begin with the lower-case `token` (of `n` bytes), folded. */
static int
starts_with(const unsigned char *p, const unsigned char *end, const unsigned char *token,
            Py_ssize_t n)
{
    if (end - p < n) {
        return 0;
    }
    /* Our own writer's keys are lower-case already: one memcmp settles almost every line. */
    return memcmp(p, token, (size_t)n) == 0 || folded_equal(p, token, n);
}

#define TOKEN(s) (const unsigned char *)(s), (Py_ssize_t)(sizeof(s) - 1)

/* Where the searched part of the line starting at `line` begins: past our own layout's start
 * ({"ts":"...","tags":[...],"text":"), or `line` itself when the line is not in that layout.
 * This is the regular expression _SKELETON in journal_plans.py; `end` bounds the buffer. */
static const unsigned char *
text_start(const unsigned char *line, const unsigned char *end)
{
    const unsigned char *p = line;
    if (!starts_with(p, end, TOKEN("{\"ts\":\""))) {
        return line;
    }
    p = find_any3(p + 7, end, '"', '\\', '\n');
    if (!starts_with(p, end, TOKEN("\",\"tags\":["))) {
        return line;
    }
    p = find_any3(p + 10, end, ']', '\\', '\n');
    if (!starts_with(p, end, TOKEN("],\"text\":\""))) {
        return line;
    }
    return p + 10;
}

typedef struct {
    Py_ssize_t *items;
    Py_ssize_t size, capacity;
} offsets;

static int
offsets_push(offsets *out, Py_ssize_t value)
{
    if (out->size == out->capacity) {
        Py_ssize_t capacity = out->capacity ? out->capacity * 2 : 64;
        Py_ssize_t *items = realloc(out->items, (size_t)capacity * sizeof *items);
        if (items == NULL) {
            return -1;
        }
        out->items = items;
        out->capacity = capacity;
    }
    out->items[out->size++] = value;
    return 0;
}

/* The scan itself (no Python objects touched). Returns -1 when out of memory. */
static int
scan(const unsigned char *buf, Py_ssize_t len, Py_ssize_t lo, const unsigned char *needle,
     Py_ssize_t m, int text_only, offsets *out)
{
    const unsigned char *end = buf + len, *pos = buf + lo; /* pos: always a line start */
    const unsigned char *hit = find_folded(pos, end, needle, m);
    while (hit != NULL) {
        const unsigned char *nl = last_newline(pos, hit);
        const unsigned char *line = nl ? nl + 1 : pos;
        if (text_only) {
            const unsigned char *text = text_start(line, end);
            if (hit < text) {
                /* Only the line's keys held it: look on from where its text begins, up to
                 * the line's end, then on from the next line. */
                const unsigned char *line_end;
                if (!find_in_line(text, end, needle, m, &line_end)) {
                    if (line_end >= end) {
                        break;
                    }
                    pos = line_end + 1;
                    hit = find_folded(pos, end, needle, m);
                    continue;
                }
            }
        }
        if (offsets_push(out, line - buf) < 0) {
            return -1;
        }
        nl = memchr(hit, '\n', (size_t)(end - hit));
        if (nl == NULL) {
            break;
        }
        pos = nl + 1;
        hit = find_folded(pos, end, needle, m);
    }
    return 0;
}

/* The line starts of buf[lo:] holding a backslash followed by a byte of `escapes` (JSON
 * escapes that may stand for part of a match), in ascending order. An escaped backslash is
 * skipped with its backslash, so "\\\\n" is no newline escape. Returns -1 when out of memory. */
static int
scan_escapes(const unsigned char *buf, Py_ssize_t len, Py_ssize_t lo, const unsigned char *escapes,
             Py_ssize_t n_escapes, offsets *out)
{
    const unsigned char *end = buf + len, *pos = buf + lo; /* pos: always a line start */
    const unsigned char *p = pos;
    if (n_escapes == 0) {
        return 0;
    }
    while ((p = memchr(p, '\\', (size_t)(end - p))) != NULL && p + 1 < end) {
        if (memchr(escapes, p[1], (size_t)n_escapes) == NULL) {
            p += 2;
            continue;
        }
        const unsigned char *nl = last_newline(pos, p);
        const unsigned char *line = nl ? nl + 1 : pos;
        if (offsets_push(out, line - buf) < 0) {
            return -1;
        }
        nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL) {
            break;
        }
        pos = p = nl + 1;
    }
    return 0;
}

/* `a` and `b` (ascending) merged into `a`, each value once. Returns -1 when out of memory. */
static int
merge_into(offsets *a, const offsets *b)
{
    if (b->size == 0) {
        return 0;
    }
    Py_ssize_t *merged = malloc((size_t)(a->size + b->size) * sizeof *merged);
    if (merged == NULL) {
        return -1;
    }
    Py_ssize_t i = 0, j = 0, k = 0;
    while (i < a->size || j < b->size) {
        Py_ssize_t next;
        if (j >= b->size || (i < a->size && a->items[i] <= b->items[j])) {
            next = a->items[i++];
        } else {
            next = b->items[j++];
        }
        if (k == 0 || merged[k - 1] != next) {
            merged[k++] = next;
        }
    }
    free(a->items);
    a->items = merged;
    a->size = k;
    a->capacity = a->size + b->size;
    return 0;
}

PyDoc_STRVAR(find_lines_doc,
"find_lines(buf, needle, lo, text_only, escapes, /)\n--\n\n"
"Start offsets (ascending) of the lines of buf[lo:] holding the lower-case ASCII needle\n"
"under ASCII case folding (with text_only, only past our own layout's line start), or a\n"
"backslash followed by a byte of escapes.");

static PyObject *
find_lines(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "find_lines() takes exactly 5 arguments");
        return NULL;
    }
    if (!PyBytes_Check(args[0]) || !PyBytes_Check(args[1]) || !PyBytes_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "find_lines() needs bytes for buf, needle and escapes");
        return NULL;
    }
    Py_ssize_t lo = PyLong_AsSsize_t(args[2]);
    if (lo == -1 && PyErr_Occurred()) {
        return NULL;
    }
    int text_only = PyObject_IsTrue(args[3]);
    if (text_only < 0) {
        return NULL;
    }
    const unsigned char *buf = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    const unsigned char *needle = (const unsigned char *)PyBytes_AS_STRING(args[1]);
    Py_ssize_t len = PyBytes_GET_SIZE(args[0]), m = PyBytes_GET_SIZE(args[1]);
    if (m == 0 || lo < 0 || lo > len) {
        PyErr_SetString(PyExc_ValueError, "find_lines() needs a non-empty needle and 0 <= lo <= len(buf)");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < m; k++) {
        if (needle[k] >= 0x80 || needle[k] == '\n' || fold[needle[k]] != needle[k]) {
            PyErr_SetString(PyExc_ValueError,
                            "find_lines() needs a lower-case ASCII needle without a newline");
            return NULL;
        }
    }
    const unsigned char *escapes = (const unsigned char *)PyBytes_AS_STRING(args[4]);
    Py_ssize_t n_escapes = PyBytes_GET_SIZE(args[4]);
    offsets out = {NULL, 0, 0}, escaped = {NULL, 0, 0};
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = scan(buf, len, lo, needle, m, text_only, &out);
    if (status == 0) {
        status = scan_escapes(buf, len, lo, escapes, n_escapes, &escaped);
    }
    if (status == 0) {
        status = merge_into(&out, &escaped);
    }
    Py_END_ALLOW_THREADS
    free(escaped.items);
    if (status < 0) {
        free(out.items);
        return PyErr_NoMemory();
    }
    PyObject *result = PyList_New(out.size);
    if (result != NULL) {
        for (Py_ssize_t k = 0; k < out.size; k++) {
            PyObject *value = PyLong_FromSsize_t(out.items[k]);
            if (value == NULL) {
                Py_CLEAR(result);
                break;
            }
            PyList_SET_ITEM(result, k, value);
        }
    }
    free(out.items);
    return result;
}

static PyMethodDef methods[] = {
    {"find_lines", (PyCFunction)(void (*)(void))find_lines, METH_FASTCALL, find_lines_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "jupyter_agent_memory._linescan",
    "The journal search's optional compiled line scanner (see journal_plans.py).",
    0,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__linescan(void)
{
    for (int c = 0; c < 256; c++) {
        fold[c] = (unsigned char)((c >= 'A' && c <= 'Z') ? c + 0x20 : c);
    }
    return PyModule_Create(&module);
}
