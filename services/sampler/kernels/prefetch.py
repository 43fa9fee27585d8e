"""Software prefetch: ask for an array element's cache line ahead of the loop that reads it.

A sampler's reads of the full graph land at random places of arrays far
larger than the caches, so each one waits for memory, and the reads of one
node's list cannot start before its ``indptr`` entry arrived. The node sets
are known before the scans start, so a loop can name the lines it will need
some nodes ahead, and the memory system then fetches many at once instead of
one after the other (docs/benchmarks/kernels.md has the figures).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

# Lines fetched ahead are for reading (rw = 0), kept in every cache level (locality 3), data (not instructions).
_READ = 0
_KEEP_ALL_LEVELS = 3
_DATA = 1


@intrinsic
def prefetch(typingctx, array, index):
    """Hint that ``array[index]`` (a 1-d contiguous array, an integer index) will be read soon; returns nothing.

    A hint only: it never faults, so an index past the end is harmless, and
    the value read later is the same with or without it.
    """
    if not (isinstance(array, types.Array) and array.ndim == 1 and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        array_type, index_type = signature.args
        data = context.make_array(array_type)(context, builder, args[0]).data
        offset = context.cast(builder, args[1], index_type, types.intp)
        address = builder.bitcast(builder.gep(data, [offset]), ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [address.type, i32, i32, i32])
        fn = builder.module.declare_intrinsic("llvm.prefetch", [address.type], fnty)
        builder.call(fn, [address, ir.Constant(i32, _READ), ir.Constant(i32, _KEEP_ALL_LEVELS),
                          ir.Constant(i32, _DATA)])
        return context.get_dummy_value()
    return types.none(array, index), codegen
