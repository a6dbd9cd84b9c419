#!/usr/bin/python3
"""Property-based fuzzing of org.example.Downloads over a real bus (python3-dbus + hypothesis).

Every method of the manager and task objects, the standard interfaces, and every Start option,
with well- and ill-typed arguments. Each call must get a reply or a D-Bus error; a missing reply
(NoReply), a vanished service or a disconnect fails the run. Prints a JSON summary.

usage: fuzz_service.py BUS_ADDRESS HTTP_BASE WRITABLE_DIR EXAMPLES
"""
import json
import logging
import os
import sys
import time
from collections import Counter

# libdbus aborts the client on a malformed argument (an invalid object path) unless told not to;
# the fuzzer wants a client-side error instead.
os.environ['DBUS_FATAL_WARNINGS'] = '0'
import dbus  # noqa: E402
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

ADDRESS, HTTP, DIR, EXAMPLES = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
NAME, MANAGER, IFACE = 'org.example.Downloads', '/org/example/Downloads', 'org.example.Downloads'
FATAL = {'org.freedesktop.DBus.Error.NoReply', 'org.freedesktop.DBus.Error.ServiceUnknown',
         'org.freedesktop.DBus.Error.NameHasNoOwner', 'org.freedesktop.DBus.Error.Disconnected'}

logging.disable(logging.CRITICAL)  # dbus-python logs every argument it cannot marshal
bus = dbus.bus.BusConnection(ADDRESS)
outcomes = Counter()
tasks = set()

text = st.text(st.characters(blacklist_characters='\x00', blacklist_categories=('Cs',)), max_size=40)
paths = st.sampled_from(['/', MANAGER, MANAGER + '/tasks', MANAGER + '/tasks/1', MANAGER + '/tasks/0',
                         MANAGER + '/tasks/18446744073709551615', MANAGER + '/tasks/x', '/a/b'])
values = st.one_of(
    text.map(dbus.String),
    st.integers(-2**31, 2**31 - 1).map(dbus.Int32),
    st.integers(0, 2**64 - 1).map(dbus.UInt64),
    st.integers(0, 2**32 - 1).map(dbus.UInt32),
    st.integers(-2**63, 2**63 - 1).map(dbus.Int64),
    st.booleans().map(dbus.Boolean),
    st.floats().map(dbus.Double),
    st.binary(max_size=300).map(dbus.ByteArray),
    paths.map(dbus.ObjectPath),
    st.lists(text, max_size=4).map(lambda l: dbus.Array(l, signature='s')),
    st.dictionaries(text, text, max_size=3).map(lambda d: dbus.Dictionary(d, signature='ss')),
)
option_keys = st.one_of(st.sampled_from([
    'session', 'headers', 'sha256', 'priority', 'max_bytes_per_second', 'connections', 'overwrite',
    'allow_metered', 'connect_timeout', 'stall_timeout', 'resource_timeout', 'desktop_entry', 'bus_name']), text)
options = st.dictionaries(option_keys, values, max_size=5).map(lambda d: dbus.Dictionary(d, signature='sv'))
urls = st.one_of(text, st.sampled_from([
    HTTP + '/small', HTTP + '/missing', HTTP + '/small?x=' + 'a' * 9000, 'ftp://127.0.0.1/x', 'http://', 'http://[::1',
    'https://127.0.0.1:1/', 'http://user:pw@127.0.0.1:1/', 'file:///etc/passwd', 'http://169.254.169.254/']))
destinations = st.one_of(text, text.map(lambda t: DIR + '/' + t), st.sampled_from([
    DIR, DIR + '/', DIR + '/file', DIR + '/../x', '/etc/passwd', '/etc', '/root/x', '/proc/self/mem', '', 'relative',
    DIR + '/a\nb', DIR + '/' + 'x' * 5000]))
# Well-typed options with hostile values, so that many Starts get past the signature checks.
typed_options = st.fixed_dictionaries({}, optional={
    'session': text.map(dbus.String),
    'priority': st.sampled_from(['low', 'normal', 'high', 'urgent', '']).map(dbus.String),
    'overwrite': st.booleans().map(dbus.Boolean),
    'allow_metered': st.booleans().map(dbus.Boolean),
    'max_bytes_per_second': st.integers(0, 2**64 - 1).map(dbus.UInt64),
    'connections': st.integers(0, 2**32 - 1).map(dbus.UInt32),
    'sha256': st.one_of(text, st.just('0' * 64)).map(dbus.String),
    'headers': st.dictionaries(text, text, max_size=3).map(lambda d: dbus.Dictionary(d, signature='ss')),
    'connect_timeout': st.floats().map(dbus.Double),
    'stall_timeout': st.floats().map(dbus.Double),
    'resource_timeout': st.floats().map(dbus.Double),
}).map(lambda d: dbus.Dictionary(d, signature='sv'))
known_task = st.sampled_from([0, 1, 2, 3]).map(lambda i: sorted(tasks)[i % len(tasks)] if tasks else MANAGER + '/tasks/1')
task_paths = st.one_of(paths, known_task)
signatures = st.sampled_from(['', 's', 'o', 'ss', 'ssa{sv}', 'sss', 'ay', 'aya{sv}', 'as', 'u', 'a{sv}', 'soa{sv}', 'v'])


def call(path, interface, method, signature, args):
    try:
        reply = bus.call_blocking(NAME, path, interface, method, signature, args, timeout=20)
        outcomes['ok ' + method] += 1
        return reply
    except dbus.DBusException as error:
        name = error.get_dbus_name()
        if name in FATAL:
            raise AssertionError(f'{method}{tuple(args)!r}: {name}: {error.get_dbus_message()}')
        outcomes[name] += 1
        return None
    except (TypeError, ValueError, OverflowError, MemoryError) as error:  # dbus-python could not marshal: not the service's fault
        outcomes['client-side ' + type(error).__name__] += 1
        return None


actions = st.one_of(
    st.tuples(st.just('start'), urls, destinations, options),
    st.tuples(st.just('start'), st.sampled_from([HTTP + '/small', HTTP + '/missing']),
              text.map(lambda t: DIR + '/' + t.replace('/', '_')), typed_options),
    st.tuples(st.just('control'), st.sampled_from(['Pause', 'Resume', 'Cancel']), task_paths),
    st.tuples(st.just('task-method'), st.sampled_from(['Pause', 'Resume', 'Cancel']), task_paths),
    st.tuples(st.just('resume-data'), st.binary(max_size=600), options),
    st.tuples(st.just('list'), text),
    st.tuples(st.just('list-all')),
    st.tuples(st.just('handler'), text, paths, options),
    st.tuples(st.just('get'), task_paths, st.sampled_from([IFACE + '.Task', IFACE, '', 'x']), text),
    st.tuples(st.just('get-all'), task_paths, st.sampled_from([IFACE + '.Task', IFACE, ''])),
    st.tuples(st.just('set'), task_paths, st.sampled_from(['URL', 'State', 'Id', 'x']), values),
    st.tuples(st.just('introspect'), task_paths),
    st.tuples(st.just('managed')),
    st.tuples(st.just('raw'), task_paths, st.sampled_from([IFACE, IFACE + '.Task', 'org.freedesktop.DBus.Properties', 'x.y']),
              st.sampled_from(['Start', 'Pause', 'ListTasks', 'Get', 'GetAll', 'ResumeWithData', 'Nope']),
              signatures, st.lists(values, max_size=4)),
)


@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(actions)
def test_service_answers(action):
    kind = action[0]
    if kind == 'start':
        path = call(MANAGER, IFACE, 'Start', 'ssa{sv}', [action[1], action[2], action[3]])
        if path is not None:
            tasks.add(str(path))
    elif kind == 'control':
        call(MANAGER, IFACE, action[1], 'o', [action[2]])
    elif kind == 'task-method':
        call(action[2], IFACE + '.Task', action[1], '', [])
    elif kind == 'resume-data':
        path = call(MANAGER, IFACE, 'ResumeWithData', 'aya{sv}', [dbus.ByteArray(action[1]), action[2]])
        if path is not None:
            tasks.add(str(path))
    elif kind == 'list':
        call(MANAGER, IFACE, 'ListTasks', 's', [action[1]])
    elif kind == 'list-all':
        call(MANAGER, IFACE, 'ListAllTasks', '', [])
    elif kind == 'handler':
        call(MANAGER, IFACE, 'RegisterCompletionHandler', 'soa{sv}', [action[1], action[2], action[3]])
    elif kind == 'get':
        call(action[1], 'org.freedesktop.DBus.Properties', 'Get', 'ss', [action[2], action[3]])
    elif kind == 'get-all':
        call(action[1], 'org.freedesktop.DBus.Properties', 'GetAll', 's', [action[2]])
    elif kind == 'set':
        call(action[1], 'org.freedesktop.DBus.Properties', 'Set', 'ssv', [IFACE + '.Task', action[2], action[3]])
    elif kind == 'introspect':
        call(action[1], 'org.freedesktop.DBus.Introspectable', 'Introspect', '', [])
    elif kind == 'managed':
        call(MANAGER, 'org.freedesktop.DBus.ObjectManager', 'GetManagedObjects', '', [])
    elif kind == 'raw':
        _, path, interface, method, signature, args = action
        # libdbus only warns (and dbus-python fails) on a string that is no object path for 'o'.
        if len(args) != len(signature) or any(c == 'o' and not isinstance(a, dbus.ObjectPath) for c, a in zip(signature, args)):
            signature = None
        call(path, interface, method, signature, args)


test_service_answers()
# Leave nothing behind: cancel what is live, then remove what ended (Cancel of an ended task).
# What each Cancel answered, for a task that is still listed at the end.
cancelled = {}
for path in list(tasks) + [str(p) for p in bus.call_blocking(NAME, MANAGER, IFACE, 'ListTasks', 's', [''])]:
    for _ in range(2):
        started = time.monotonic()
        try:
            bus.call_blocking(NAME, MANAGER, IFACE, 'Cancel', 'o', [path], timeout=20)
            answer = 'ok'
        except dbus.DBusException as error:
            answer = f"{error.get_dbus_name()}: {error.get_dbus_message()}"
        cancelled.setdefault(path, []).append(f"{answer} after {time.monotonic() - started:.2f} s")
def describe(path):
    values = bus.call_blocking(NAME, path, 'org.freedesktop.DBus.Properties', 'GetAll', 's', [IFACE + '.Task'])
    return f"{path} {values.get('State')} {values.get('Error')} {values.get('ErrorMessage')}; Cancel: {cancelled.get(path)}"


left = [describe(str(p)) for p in bus.call_blocking(NAME, MANAGER, IFACE, 'ListTasks', 's', [''])]
print(json.dumps({'calls': sum(outcomes.values()), 'tasks': len(tasks), 'left': left, 'outcomes': outcomes}))
