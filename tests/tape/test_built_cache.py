"""Generated entries kept on disk by lowered program (dualad.tape.built_cache): a second
program object of the same recording, in this process or a new one, imports the module
written before instead of writing it; another program, other settings, a damaged or
changed file, or a program calling functions run as themselves is written again; results
always match eager mode and central differences."""

import functools
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import dualad as ad
import dualad.tape.numba_backend as backend
from dualad.derivatives.codegen import KernelCacheWarning
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.tape import record
from dualad.tape.built_cache import entry_key, program_digest
from dualad.tape.lowering import LoweringError, lower
from dualad.tape.numba_backend import NumbaProgram

pytest.importorskip("numba")


def loss(x):
    return np.sum(np.sin(x) * x ** 2) + x[0] * x[-1]


def tridiagonal(y):  # a dense Jacobian seeded compressed (at least MIN_COMPRESSED inputs)
    out = -2.0 * y ** 3
    out[1:] += np.sin(y[:-1])
    out[:-1] += y[1:] * y[1:]
    return out


POINTS = [np.array([0.3, -1.2, 0.8, 0.5]), np.array([1.5, 0.2, -0.7, 2.0])]


@pytest.fixture
def writes(monkeypatch):
    """How many entry modules are written (NumbaProgram._module calls)."""
    made = []
    original = NumbaProgram._module

    def counted(self, *args, **kw):
        made.append(args[0])
        return original(self, *args, **kw)

    monkeypatch.setattr(NumbaProgram, "_module", counted)
    return made


def program(f, x):
    return NumbaProgram(lower(record(f, x).program, [x]))


def check_gradient(kernel, x):
    np.testing.assert_allclose(kernel(x), ad.grad(loss)(x), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(kernel(x), numerical_jacobian(loss, (x,), 0), rtol=1e-6, atol=1e-7)


def test_a_second_program_object_imports_the_kept_entry(cache, writes):
    first = program(loss, POINTS[0]).gradient((0,), value=False)
    assert len(writes) == 1
    second = program(loss, POINTS[0]).gradient((0,), value=False)
    assert len(writes) == 1  # read, not written
    assert list((cache / "tapes" / "built").glob("*.entry"))
    for x in POINTS:
        check_gradient(first, x)
        check_gradient(second, x)


def test_each_entry_and_argument_has_its_own_kept_module(cache, writes):
    code = program(loss, POINTS[0])
    grad = code.gradient((0,), value=False)
    both = code.gradient((0,))  # (value, (gradient,))
    jac = code.jacobian((0,))
    assert len(writes) == 3
    again = program(loss, POINTS[0])
    assert again.gradient((0,)) is not None and again.jacobian((0,)) is not None
    assert len(writes) == 3
    x = POINTS[1]
    value, (g,) = both(x)
    assert value == pytest.approx(loss(x), rel=1e-14)
    np.testing.assert_allclose(g, grad(x), rtol=1e-14)
    np.testing.assert_allclose(jac(x), grad(x), rtol=1e-14)
    value2, (g2,) = again.gradient((0,))(x)
    assert value2 == value and np.array_equal(g2, g)


def test_entries_with_the_same_arguments_are_told_apart(cache, writes):
    """jvp and vjp of one program take the same arguments: each is its own entry, in
    the program object's memory and on disk."""
    def f(x):
        return np.sin(x) * x[0]

    x, t = POINTS[0], np.array([1.0, -2.0, 0.5, 3.0])
    for _ in range(2):  # written, then read
        code = program(f, x)
        jvp, vjp = code.jvp((0,)), code.vjp((0,))
        out, tangent = jvp(x, t)
        np.testing.assert_allclose(tangent, ad.jacobian(f)(x) @ t, rtol=1e-13)
        out2, (cotangent,) = vjp(x, t)
        np.testing.assert_allclose(cotangent, t @ ad.jacobian(f)(x), rtol=1e-13)
        np.testing.assert_allclose(out, f(x), rtol=1e-14)
        np.testing.assert_allclose(out2, f(x), rtol=1e-14)
    assert writes == ["tape_jvp", "tape_vjp"]


def test_entries_made_in_threads_are_kept_each_as_itself(cache, writes, monkeypatch):
    """Several threads making entries of one program object at once: each entry kept
    on disk is its own (read back by a new program object, the numbers are right)."""
    code = program(loss, POINTS[0])
    barrier = threading.Barrier(3)
    made = {}
    written = NumbaProgram._module

    def slowly(self, *args, **kw):  # a module written, then a pause: the others write
        found = written(self, *args, **kw)
        time.sleep(0.05)
        return found

    monkeypatch.setattr(NumbaProgram, "_module", slowly)

    def make(kind):
        barrier.wait()
        made[kind] = (code.gradient((0,), value=False) if kind == "gradient" else
                      code.jacobian((0,)) if kind == "jacobian" else code.value())

    threads = [threading.Thread(target=make, args=(k,)) for k in ("gradient", "jacobian",
                                                                   "value")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(writes) == ["tape_gradient", "tape_jacobian", "tape_value"]
    again = program(loss, POINTS[0])
    x = POINTS[1]
    for entry in (made, {"gradient": again.gradient((0,), value=False),
                         "jacobian": again.jacobian((0,)), "value": again.value()}):
        check_gradient(entry["gradient"], x)
        np.testing.assert_allclose(entry["jacobian"](x), ad.grad(loss)(x), rtol=1e-13)
        assert entry["value"](x) == pytest.approx(loss(x), rel=1e-14)
    assert len(writes) == 3


def test_different_constants_are_different_programs(cache, writes):
    """Programs differing in one constant have different keys: each is written and each
    computes its own derivative (no entry of the other is read)."""
    def scaled(c):
        return lambda x: np.sum(np.sin(x * c))

    x = POINTS[0]
    for c in (2.0, 3.0, -0.5):
        kernel = program(scaled(c), x).gradient((0,), value=False)
        np.testing.assert_allclose(kernel(x), c * np.cos(x * c), rtol=1e-13)
    assert len(writes) == 3
    lows = [lower(record(scaled(c), x).program, [x]) for c in (2.0, 3.0)]
    keys = {entry_key(program_digest(low), "gradient", ((0,), False, False)) for low in lows}
    assert len(keys) == 2 and None not in keys


def test_constant_arrays_bound_to_the_entry_are_kept(cache, writes):
    """Constants longer than MAX_GLOBAL_ARRAY are handed to the kernel, not written in
    its source: they are kept with the entry, and read back as the kernel takes them."""
    n = backend.MAX_GLOBAL_ARRAY + 36
    c = np.linspace(-2.0, 3.0, n)
    picks = (np.arange(n) * 7) % n

    def f(x):
        return np.sum(np.sin(x[picks]) * c) + np.sum(x * c[::-1])

    x = np.linspace(0.1, 1.0, n)
    first = program(f, x).gradient((0,), value=False)
    assert isinstance(first, functools.partial) and first.args  # arrays bound first
    second = program(f, x).gradient((0,), value=False)
    assert len(writes) == 1 and isinstance(second, functools.partial)
    for a, b in zip(first.args, second.args):
        assert a.dtype == b.dtype and np.array_equal(a, b) and b.flags.writeable
    for z in (x, x[::-1] * 0.5):
        np.testing.assert_allclose(second(z), ad.grad(f)(z), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(second(z), numerical_jacobian(f, (z,), 0), rtol=1e-6,
                                   atol=1e-7)


def test_another_size_is_another_program(cache, writes):
    kernels = [program(loss, np.linspace(-1.0, 1.0, n)).gradient((0,), value=False)
               for n in (3, 4, 4)]
    assert len(writes) == 2
    for n, kernel in zip((3, 4, 4), kernels):
        check_gradient(kernel, np.linspace(-0.7, 1.3, n))


def test_changed_settings_write_the_entry_again(cache, writes, monkeypatch):
    program(loss, POINTS[0]).gradient((0,), value=False)
    monkeypatch.setattr(backend, "MAX_FUNCTION_LINES", 7)
    kernel = program(loss, POINTS[0]).gradient((0,), value=False)
    assert len(writes) == 2
    check_gradient(kernel, POINTS[1])
    monkeypatch.setattr(backend, "MAX_COMPILE_COST", 1)  # nothing compiles
    with pytest.raises(LoweringError):
        program(loss, POINTS[0]).gradient((0,), value=False)


def test_a_refused_entry_is_refused_again_without_writing(cache, monkeypatch):
    """Beyond the compile-cost cap the writer stops (LoweringError); a second program
    object of the same recording is refused with the same reason at once, and ad.jit runs
    it in the interpreter, with eager mode's numbers."""
    monkeypatch.setattr(backend, "MAX_COMPILE_COST", 5)
    started = []
    original = NumbaProgram._prologue

    def counted(self, *args):
        started.append(1)
        return original(self, *args)

    monkeypatch.setattr(NumbaProgram, "_prologue", counted)
    reasons = []
    for _ in range(2):
        with pytest.raises(LoweringError, match="MAX_COMPILE_COST") as caught:
            program(loss, POINTS[0]).gradient((0,), value=False)
        reasons.append(str(caught.value))
    assert len(started) == 1 and reasons[0] == reasons[1]
    g = ad.jit(ad.grad(loss), fallback="error")
    for x in POINTS:
        check_gradient(g, x)
    assert g._fast_entry.kernel.__qualname__.startswith("InterpretedProgram.")
    assert len(started) == 1  # ad.jit's build read the refusal too
    monkeypatch.setattr(backend, "MAX_COMPILE_COST", 10 ** 6)  # another key: written
    check_gradient(program(loss, POINTS[0]).gradient((0,), value=False), POINTS[1])
    assert len(started) == 2


@pytest.mark.parametrize("damage", [b"", b"not an entry file", None])
def test_a_damaged_entry_file_is_written_again(cache, writes, damage):
    program(loss, POINTS[0]).gradient((0,), value=False)
    (kept,) = (cache / "tapes" / "built").glob("*.entry")
    data = kept.read_bytes()
    kept.write_bytes(data[: len(data) // 2] if damage is None else damage)
    kernel = program(loss, POINTS[0]).gradient((0,), value=False)
    assert len(writes) == 2
    check_gradient(kernel, POINTS[1])
    program(loss, POINTS[0]).gradient((0,), value=False)  # kept again, whole
    assert len(writes) == 2


def test_a_changed_module_file_is_not_imported(cache, writes, monkeypatch):
    def own(x):  # a program no other test compiles: its module is written here
        return np.sum(np.sin(x) * 1.2345) * x[1]

    x = POINTS[1]
    program(own, x).gradient((0,), value=False)
    (module,) = (cache / "tapes").glob("dualad_kernel_*.py")
    monkeypatch.delitem(sys.modules, module.stem)  # as in a new process
    text = module.read_text()
    changed = text.replace("math.sin", "math.cos").replace("np.sin", "np.cos")
    assert changed != text  # imported, it would compute another derivative
    module.write_text(changed)
    with warnings.catch_warnings():  # the module is repaired (KernelCacheWarning)
        warnings.simplefilter("ignore", KernelCacheWarning)
        kernel = program(own, x).gradient((0,), value=False)
    assert len(writes) == 2
    np.testing.assert_allclose(kernel(x), ad.grad(own)(x), rtol=1e-13)
    np.testing.assert_allclose(kernel(x), numerical_jacobian(own, (x,), 0), rtol=1e-6)


def test_a_program_calling_functions_run_as_themselves_is_not_kept(cache, writes):
    def det_loss(x):
        return np.log(np.linalg.det(np.outer(x, x) + np.eye(x.size) * 2.0))

    x = POINTS[0]
    low = lower(record(det_loss, x).program, [x])
    assert program_digest(low) is None
    for _ in range(2):
        kernel = NumbaProgram(low).gradient((0,), value=False)
        np.testing.assert_allclose(kernel(x), ad.grad(det_loss)(x), rtol=1e-12)
        np.testing.assert_allclose(kernel(x), numerical_jacobian(det_loss, (x,), 0), rtol=1e-6)
    assert len(writes) == 2
    assert not list((cache / "tapes" / "built").glob("*.entry"))


@pytest.mark.parametrize("zeros_from_numpy", [False, True])
def test_a_compressed_dense_jacobian_is_kept(cache, writes, monkeypatch, zeros_from_numpy):
    if zeros_from_numpy:  # the kernel takes its zeroed matrix from the caller
        monkeypatch.setattr(backend, "MIN_CALLER_ZEROS", 0)
    y = np.linspace(-1.0, 1.2, 10)
    jacs = [ad.jit(ad.jacobian(tridiagonal), fallback="error") for _ in range(2)]
    got = [jac(y) for jac in jacs]
    assert len(writes) == 1
    names = {getattr(k, "__name__", None) or k.func.__name__
             for k in (jac._fast_entry.kernel for jac in jacs)}
    assert names == ({"zeroed_first"} if zeros_from_numpy else {"tape_compressed_jacobian"})
    for z in (y, y[::-1] + 0.3):
        expected = ad.jacobian(tridiagonal)(z)
        for jac in jacs:
            np.testing.assert_allclose(jac(z), expected, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(jacs[1](z), numerical_jacobian(tridiagonal, (z,), 0),
                                   rtol=1e-6, atol=1e-6)
    assert np.array_equal(got[0], got[1])


def test_a_new_process_imports_the_kept_entries(tmp_path):
    """Run twice in new processes with one cache: the second writes no module and returns
    the same numbers."""
    script = textwrap.dedent("""
        import numpy as np
        import dualad as ad
        from dualad.tape.numba_backend import NumbaProgram
        made = []
        original = NumbaProgram._module
        def counted(self, *args, **kw):
            made.append(args[0])
            return original(self, *args, **kw)
        NumbaProgram._module = counted
        def f(y):
            return np.concatenate([y[1:] * y[:-1], [np.sum(np.exp(-y))]])
        y = np.linspace(0.2, 1.1, 5)
        jac = ad.jit(ad.jacobian(f), fallback="error")(y).ravel().tolist()
        grad = ad.jit(ad.grad(lambda y: np.sum(f(y) ** 2)), fallback="error")(y).tolist()
        print(len(made), *jac, *grad)
    """)
    env = dict(os.environ, DUALAD_KERNEL_CACHE=str(tmp_path))
    root = Path(__file__).resolve().parents[2]
    runs = [subprocess.run([sys.executable, "-c", script], env=env, cwd=root,
                           capture_output=True, text=True, timeout=300) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr[-2000:]
    first, second = (run.stdout.split() for run in runs)
    assert int(first[0]) == 2 and int(second[0]) == 0
    assert first[1:] == second[1:]
