# cython: language_level=3, boundscheck=False, wraparound=False
"""The full scan's loop over records, compiled: ``event_scan._events_batch`` with no Python line a record.

It keeps the Python loop's contract and gives the same events (tests/contract/test_event_scan.py
and test_domain_event_scan.py run both loops on the same logs). What it does differently:

* a record is compared with the first record of its segment in place (``memcmp``), where the
  Python loop slices two byte strings a record to compare them;
* a run of plain states is decoded a record at a time straight into its event, with no list
  between the steps, and the event is allocated and given its dict by the C calls that
  ``object.__new__`` and the ``__dict__`` descriptor make (``PyType_GenericAlloc``,
  ``PyObject_GenericSetDict``), without a Python call for either.

Whatever is not the common case (a state its class's shape does not fit, a class with no shape,
a record the layered path reads) is handed to the same Python functions as before, which decide
it as they always did. ``setup.py`` builds this file when a C compiler is at hand; without one
the scan runs the Python loop (``event_scan.compiled_loop()`` says which).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_Append
from libc.string cimport memcmp

from itertools import chain, islice


cdef extern from "Python.h":
    int PyObject_GenericSetDict(object o, object value, void* context) except -1
    object PyType_GenericAlloc(object cls, Py_ssize_t nitems)


# A record's format and the lengths of its originator id and topic: the first bytes a segment shares.
cdef Py_ssize_t _LENGTHS = 5


cdef inline long long _version(const unsigned char* record):
    """The header's version: a big-endian signed 64-bit integer after the format and the two lengths."""
    cdef unsigned long long version = 0
    cdef int i
    for i in range(5, 13):
        version = (version << 8) | record[i]
    return <long long>version


def events_batch(cursor, Py_ssize_t first, Py_ssize_t limit, dict kinds, kind_of, slow, dict shapes, tuple helpers):
    """``event_scan._events_batch``'s arguments and answer; ``helpers`` are what it shares with that
    loop: the reading of a segment's first record (``_segment_start``), the Python decoding of a run,
    the marker of a kind no one asked for, a struct's fields as a dict, the adding of a span of ids."""
    segment_start, decode_run, skip, asdict, add_span = helpers
    cdef list events = []
    cdef list spans = []
    cdef list values = []
    cdef list segments = []  # (where the segment starts in ``values``, its kind, its originator id)
    cdef Py_ssize_t run_first = first
    cdef bint loose = False
    cdef bint plain = False
    cdef object kind = None
    cdef object originator_id = None
    cdef bytes segment_first = None  # the segment's first record, which the others are compared with
    cdef const char* reference = NULL
    cdef const char* record
    cdef Py_ssize_t size, same_start = 0, same_stop = 0, end = 0, nid
    cdef object last_raw_oid = None
    cdef bytes value
    for value in islice(cursor.iternext(keys=False, values=True), limit):
        record = PyBytes_AS_STRING(value)
        size = PyBytes_GET_SIZE(value)
        if not (reference != NULL and size >= same_stop and memcmp(record, reference, _LENGTHS) == 0
                and memcmp(record + same_start, reference + same_start, same_stop - same_start) == 0):
            started = segment_start(value, cursor, kinds, kind_of, shapes, last_raw_oid, originator_id)
            if started is None:
                return None, None, 0
            (_, _, at_same, end), kind, last_raw_oid, originator_id = started
            same_start, same_stop = at_same.start, at_same.stop
            segment_first = value
            reference = record
            plain = kind is not skip and kind[0] is not None
            loose = loose or (plain and kind[3] is None)
            if plain:
                segments.append((len(values), kind, originator_id))
        if plain:
            values.append(value)
            continue
        # Not one of a run: numbered after the run before it, which is decoded first.
        nid = run_first + len(values)
        if values:
            _decode_run(values, segments, run_first, loose, events, spans, slow, kinds, decode_run, asdict, add_span)
            values, segments, loose = [], [], False
        run_first = nid + 1
        if kind is not skip:
            events.append(slow(nid, originator_id, _version(<const unsigned char*>record), kind[1], value[end:]))
            add_span(spans, nid, nid + 1)
    if values:
        _decode_run(values, segments, run_first, loose, events, spans, slow, kinds, decode_run, asdict, add_span)
    ids = spans[0] if len(spans) == 1 else chain.from_iterable(spans)
    return ids, events, run_first + len(values) - first


cdef _decode_run(list values, list segments, Py_ssize_t first, bint loose, list events, list spans, slow, dict kinds,
                 decode_run, asdict, add_span):
    """The run's events appended to ``events`` and their ids to ``spans``; a run with a state its
    class's shape does not fit, or a class with no shape, goes whole to the Python ``decode_run``."""
    cdef Py_ssize_t made = len(events)
    cdef Py_ssize_t i, k, start, stop, cut, size
    cdef bytes value
    cdef const char* record
    cdef dict state
    if not loose:
        try:
            for k in range(len(segments)):
                start, kind, originator_id = segments[k]
                stop = segments[k + 1][0] if k + 1 < len(segments) else len(values)
                cls = kind[0]
                cut = kind[2].start
                decode = kind[3].decode
                for i in range(start, stop):
                    value = values[i]
                    record = PyBytes_AS_STRING(value)
                    size = PyBytes_GET_SIZE(value)
                    state = asdict(decode(PyBytes_FromStringAndSize(record + cut, size - cut)))
                    state["originator_id"] = originator_id
                    state["originator_version"] = _version(<const unsigned char*>record)
                    event = PyType_GenericAlloc(cls, 0)
                    PyObject_GenericSetDict(event, state, NULL)
                    PyList_Append(events, event)
        except Exception:  # a state that does not fit its shape: the Python path decides, as before
            del events[made:]
        else:
            add_span(spans, first, first + len(values))
            return
    run_kinds, run_ids = [], []
    for k in range(len(segments)):
        start, kind, originator_id = segments[k]
        stop = segments[k + 1][0] if k + 1 < len(segments) else len(values)
        run_kinds += [kind] * (stop - start)
        run_ids += [originator_id] * (stop - start)
    decode_run(values, first, run_kinds, run_ids, loose, events, spans, slow, kinds)


def split_records(bytes body, Py_ssize_t count):
    """A batch's records out of its decompressed body (``record_batches.held``): ``count`` big-endian
    32-bit lengths, then the records one after another; None when the lengths do not add up to the body."""
    cdef const unsigned char* raw = <const unsigned char*>PyBytes_AS_STRING(body)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(body)
    cdef Py_ssize_t at = count * 4
    cdef Py_ssize_t i, length
    cdef list records = []
    if count < 0 or at > size:
        return None
    for i in range(count):
        length = ((<Py_ssize_t>raw[4 * i] << 24) | (<Py_ssize_t>raw[4 * i + 1] << 16)
                  | (<Py_ssize_t>raw[4 * i + 2] << 8) | <Py_ssize_t>raw[4 * i + 3])
        if length > size - at:
            return None
        PyList_Append(records, PyBytes_FromStringAndSize(<const char*>raw + at, length))
        at += length
    if at != size:
        return None
    return records
