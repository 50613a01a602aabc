"""ctypes declarations of llama.cpp's C API (``include/llama.h``).

This module mirrors ``include/llama.h`` of the pinned llama.cpp tree
(``vendor/llama-cpp-pin.json``: tag v0.5.0, commit 7fe450e19305) and the few
pieces of the ggml headers that llama.h's structs and functions need.  It only
declares things; nothing here loads a library.  :func:`bind` puts the
prototypes of :data:`FUNCTIONS` (libllama) or :data:`GGML_FUNCTIONS`
(libggml / libggml-base) onto a loaded :class:`ctypes.CDLL`.

Conventions:

* Structs are :class:`ctypes.Structure` subclasses named exactly as in C, with
  the C field names, order and types.
* Opaque handles (``struct llama_model *`` ...) are plain ``c_void_p``
  aliases such as :data:`llama_model_p`; a NULL handle comes back as ``None``.
* C enums become :class:`enum.IntEnum` classes in CamelCase with the common
  prefix removed (``LLAMA_POOLING_TYPE_MEAN`` -> ``LlamaPoolingType.MEAN``);
  :data:`C_ENUMS` maps each C enum name to its class and prefix.  Enum-typed
  fields, parameters and results are declared ``c_int``.
* ``const char *`` results are ``c_char_p`` (ctypes hands back ``bytes``).

When the pin moves, this file has to be re-read against the new header.
``tests/native/test_llama_h_layout.py`` proves it matches: it compiles a C
program against the vendored headers and compares ``sizeof``/``offsetof``/
``_Alignof`` of every struct and field, the values of every enum and
``#define`` constant, and it parses llama.h to check every prototype's
parameter count and types and the set of declared functions.
"""

from __future__ import annotations

import ctypes
import enum
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    Union,
    c_bool,
    c_char,
    c_char_p,
    c_double,
    c_float,
    c_int,
    c_int8,
    c_int32,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Any

# ---------------------------------------------------------------------------
# #define constants
# ---------------------------------------------------------------------------

LLAMA_DEFAULT_SEED = 0xFFFFFFFF
LLAMA_TOKEN_NULL = -1

LLAMA_FILE_MAGIC_GGLA = 0x67676C61  # 'ggla'
LLAMA_FILE_MAGIC_GGSN = 0x6767736E  # 'ggsn'
LLAMA_FILE_MAGIC_GGSQ = 0x67677371  # 'ggsq'

LLAMA_SESSION_MAGIC = LLAMA_FILE_MAGIC_GGSN
LLAMA_SESSION_VERSION = 10

LLAMA_STATE_SEQ_MAGIC = LLAMA_FILE_MAGIC_GGSQ
LLAMA_STATE_SEQ_VERSION = 3

# flags for llama_state_seq_*_ext
LLAMA_STATE_SEQ_FLAGS_NONE = 0
LLAMA_STATE_SEQ_FLAGS_SWA_ONLY = 1  # backwards-compat name of PARTIAL_ONLY
LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY = 1
LLAMA_STATE_SEQ_FLAGS_ON_DEVICE = 2

#: every #define above, for the layout test
DEFINES: tuple[str, ...] = (
    "LLAMA_DEFAULT_SEED",
    "LLAMA_TOKEN_NULL",
    "LLAMA_FILE_MAGIC_GGLA",
    "LLAMA_FILE_MAGIC_GGSN",
    "LLAMA_FILE_MAGIC_GGSQ",
    "LLAMA_SESSION_MAGIC",
    "LLAMA_SESSION_VERSION",
    "LLAMA_STATE_SEQ_MAGIC",
    "LLAMA_STATE_SEQ_VERSION",
    "LLAMA_STATE_SEQ_FLAGS_NONE",
    "LLAMA_STATE_SEQ_FLAGS_SWA_ONLY",
    "LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY",
    "LLAMA_STATE_SEQ_FLAGS_ON_DEVICE",
)

# ---------------------------------------------------------------------------
# Scalar typedefs and opaque handles
# ---------------------------------------------------------------------------

llama_pos = c_int32
llama_token = c_int32
llama_seq_id = c_int32
llama_state_seq_flags = c_uint32

# typedef struct llama_memory_i * llama_memory_t;
llama_memory_t = c_void_p
# typedef void * llama_sampler_context_t;
llama_sampler_context_t = c_void_p

# pointers to opaque structs
llama_model_p = c_void_p
llama_context_p = c_void_p
llama_vocab_p = c_void_p
llama_sampler_p = c_void_p  # struct llama_sampler is public (below) but used as a handle
llama_memory_p = llama_memory_t
llama_adapter_lora_p = c_void_p

# ggml / gguf handles that appear in llama.h
ggml_backend_dev_t = c_void_p
ggml_backend_reg_t = c_void_p
ggml_backend_buffer_type_t = c_void_p
ggml_threadpool_t = c_void_p
ggml_opt_dataset_t = c_void_p
ggml_opt_result_t = c_void_p
ggml_opt_context_t = c_void_p
ggml_tensor_p = c_void_p
ggml_context_p = c_void_p
ggml_cgraph_p = c_void_p
gguf_context_p = c_void_p
FILE_p = c_void_p

# ---------------------------------------------------------------------------
# Enums (llama.h)
# ---------------------------------------------------------------------------


class LlamaVocabType(enum.IntEnum):
    NONE = 0  # for models without vocab
    SPM = 1  # LLaMA tokenizer: byte-level BPE with byte fallback
    BPE = 2  # GPT-2 tokenizer: byte-level BPE
    WPM = 3  # BERT tokenizer: WordPiece
    UGM = 4  # T5 tokenizer: Unigram
    RWKV = 5  # RWKV tokenizer: greedy tokenization
    PLAMO2 = 6  # PLaMo-2 tokenizer: Aho-Corasick with dynamic programming
    TEST = 7  # dummy tokenizer for testing


class LlamaRopeType(enum.IntEnum):
    NONE = -1
    NORM = 0
    NEOX = 2  # GGML_ROPE_TYPE_NEOX
    MROPE = 8  # GGML_ROPE_TYPE_MROPE
    IMROPE = 40  # GGML_ROPE_TYPE_IMROPE
    VISION = 24  # GGML_ROPE_TYPE_VISION


class LlamaTokenType(enum.IntEnum):
    UNDEFINED = 0
    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


class LlamaTokenAttr(enum.IntFlag):
    UNDEFINED = 0
    UNKNOWN = 1 << 0
    UNUSED = 1 << 1
    NORMAL = 1 << 2
    CONTROL = 1 << 3
    USER_DEFINED = 1 << 4
    BYTE = 1 << 5
    NORMALIZED = 1 << 6
    LSTRIP = 1 << 7
    RSTRIP = 1 << 8
    SINGLE_WORD = 1 << 9


class LlamaFtype(enum.IntEnum):
    ALL_F32 = 0
    MOSTLY_F16 = 1
    MOSTLY_Q4_0 = 2
    MOSTLY_Q4_1 = 3
    MOSTLY_Q8_0 = 7
    MOSTLY_Q5_0 = 8
    MOSTLY_Q5_1 = 9
    MOSTLY_Q2_K = 10
    MOSTLY_Q3_K_S = 11
    MOSTLY_Q3_K_M = 12
    MOSTLY_Q3_K_L = 13
    MOSTLY_Q4_K_S = 14
    MOSTLY_Q4_K_M = 15
    MOSTLY_Q5_K_S = 16
    MOSTLY_Q5_K_M = 17
    MOSTLY_Q6_K = 18
    MOSTLY_IQ2_XXS = 19
    MOSTLY_IQ2_XS = 20
    MOSTLY_Q2_K_S = 21
    MOSTLY_IQ3_XS = 22
    MOSTLY_IQ3_XXS = 23
    MOSTLY_IQ1_S = 24
    MOSTLY_IQ4_NL = 25
    MOSTLY_IQ3_S = 26
    MOSTLY_IQ3_M = 27
    MOSTLY_IQ2_S = 28
    MOSTLY_IQ2_M = 29
    MOSTLY_IQ4_XS = 30
    MOSTLY_IQ1_M = 31
    MOSTLY_BF16 = 32
    MOSTLY_TQ1_0 = 36
    MOSTLY_TQ2_0 = 37
    MOSTLY_MXFP4_MOE = 38
    MOSTLY_NVFP4 = 39
    MOSTLY_Q1_0 = 40
    MOSTLY_Q2_0 = 41
    GUESSED = 1024  # not specified in the model file


class LlamaRopeScalingType(enum.IntEnum):
    UNSPECIFIED = -1
    NONE = 0
    LINEAR = 1
    YARN = 2
    LONGROPE = 3
    MAX_VALUE = 3  # alias of LONGROPE


class LlamaPoolingType(enum.IntEnum):
    UNSPECIFIED = -1
    NONE = 0
    MEAN = 1
    CLS = 2
    LAST = 3
    RANK = 4  # reranking models: classification head on the graph


class LlamaAttentionType(enum.IntEnum):
    UNSPECIFIED = -1
    CAUSAL = 0
    NON_CAUSAL = 1


class LlamaFlashAttnType(enum.IntEnum):
    AUTO = -1
    DISABLED = 0
    ENABLED = 1


class LlamaSplitMode(enum.IntEnum):
    NONE = 0  # single GPU
    LAYER = 1  # split layers and KV across GPUs
    ROW = 2  # split layers and KV across GPUs, tensor parallelism if supported
    TENSOR = 3


class LlamaLoadMode(enum.IntEnum):
    AUTO = -1  # auto-detect based on device capabilities
    NONE = 0
    MMAP = 1
    MLOCK = 2
    MMAP_MLOCK = 3
    DIRECT_IO = 4


class LlamaLazyMode(enum.IntEnum):
    OFF = 0  # always read the whole tensor up front
    AUTO = 1  # lazy only for marked tensors larger than 4 GiB (requires mmap)
    ON = 2  # read rows of marked tensors on demand (requires mmap)


class LlamaContextType(enum.IntEnum):
    DEFAULT = 0
    MTP = 1


class LlamaModelKvOverrideType(enum.IntEnum):
    INT = 0
    FLOAT = 1
    BOOL = 2
    STR = 3


class LlamaModelMetaKey(enum.IntEnum):
    SAMPLING_SEQUENCE = 0
    SAMPLING_TOP_K = 1
    SAMPLING_TOP_P = 2
    SAMPLING_MIN_P = 3
    SAMPLING_XTC_PROBABILITY = 4
    SAMPLING_XTC_THRESHOLD = 5
    SAMPLING_TEMP = 6
    SAMPLING_PENALTY_LAST_N = 7
    SAMPLING_PENALTY_REPEAT = 8
    SAMPLING_MIROSTAT = 9
    SAMPLING_MIROSTAT_TAU = 10
    SAMPLING_MIROSTAT_ETA = 11


# ---------------------------------------------------------------------------
# Enums from the ggml headers that llama.h's structs/functions use
# ---------------------------------------------------------------------------


class GgmlLogLevel(enum.IntEnum):  # ggml.h
    NONE = 0
    DEBUG = 1
    INFO = 2
    WARN = 3
    ERROR = 4
    CONT = 5  # continue previous log


class GgmlType(enum.IntEnum):  # ggml.h; llama_context_params.type_k/type_v, quantize params
    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q8_1 = 9
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    Q8_K = 15
    IQ2_XXS = 16
    IQ2_XS = 17
    IQ3_XXS = 18
    IQ1_S = 19
    IQ4_NL = 20
    IQ3_S = 21
    IQ2_S = 22
    IQ4_XS = 23
    I8 = 24
    I16 = 25
    I32 = 26
    I64 = 27
    F64 = 28
    IQ1_M = 29
    BF16 = 30
    TQ1_0 = 34
    TQ2_0 = 35
    MXFP4 = 39
    NVFP4 = 40
    Q1_0 = 41
    Q2_0 = 42
    COUNT = 43


class GgmlNumaStrategy(enum.IntEnum):  # ggml-cpu.h; llama_numa_init
    DISABLED = 0
    DISTRIBUTE = 1
    ISOLATE = 2
    NUMACTL = 3
    MIRROR = 4
    COUNT = 5


class GgmlOptOptimizerType(enum.IntEnum):  # ggml-opt.h; llama_opt_params.optimizer_type
    ADAMW = 0
    SGD = 1
    COUNT = 2


class GgmlBackendDevType(enum.IntEnum):  # ggml-backend.h; ggml_backend_dev_type()
    CPU = 0  # CPU device using system memory
    GPU = 1  # GPU device using dedicated memory
    IGPU = 2  # integrated GPU device using host memory
    ACCEL = 3  # accelerator used together with the CPU backend (BLAS, AMX)
    META = 4  # "meta" device wrapping several devices for tensor parallelism


#: C enum name -> (Python class, prefix of the C enumerator names)
C_ENUMS: dict[str, tuple[type[enum.IntEnum] | type[enum.IntFlag], str]] = {
    "llama_vocab_type": (LlamaVocabType, "LLAMA_VOCAB_TYPE_"),
    "llama_rope_type": (LlamaRopeType, "LLAMA_ROPE_TYPE_"),
    "llama_token_type": (LlamaTokenType, "LLAMA_TOKEN_TYPE_"),
    "llama_token_attr": (LlamaTokenAttr, "LLAMA_TOKEN_ATTR_"),
    "llama_ftype": (LlamaFtype, "LLAMA_FTYPE_"),
    "llama_rope_scaling_type": (LlamaRopeScalingType, "LLAMA_ROPE_SCALING_TYPE_"),
    "llama_pooling_type": (LlamaPoolingType, "LLAMA_POOLING_TYPE_"),
    "llama_attention_type": (LlamaAttentionType, "LLAMA_ATTENTION_TYPE_"),
    "llama_flash_attn_type": (LlamaFlashAttnType, "LLAMA_FLASH_ATTN_TYPE_"),
    "llama_split_mode": (LlamaSplitMode, "LLAMA_SPLIT_MODE_"),
    "llama_load_mode": (LlamaLoadMode, "LLAMA_LOAD_MODE_"),
    "llama_lazy_mode": (LlamaLazyMode, "LLAMA_LAZY_MODE_"),
    "llama_context_type": (LlamaContextType, "LLAMA_CONTEXT_TYPE_"),
    "llama_model_kv_override_type": (LlamaModelKvOverrideType, "LLAMA_KV_OVERRIDE_TYPE_"),
    "llama_model_meta_key": (LlamaModelMetaKey, "LLAMA_MODEL_META_KEY_"),
    "ggml_log_level": (GgmlLogLevel, "GGML_LOG_LEVEL_"),
    "ggml_type": (GgmlType, "GGML_TYPE_"),
    "ggml_numa_strategy": (GgmlNumaStrategy, "GGML_NUMA_STRATEGY_"),
    "ggml_opt_optimizer_type": (GgmlOptOptimizerType, "GGML_OPT_OPTIMIZER_TYPE_"),
    "ggml_backend_dev_type": (GgmlBackendDevType, "GGML_BACKEND_DEVICE_TYPE_"),
}

# ---------------------------------------------------------------------------
# Callback types
# ---------------------------------------------------------------------------
# Keep a reference to every callback object handed to C for as long as C may
# call it; ctypes does not.

# ggml.h: typedef bool (*ggml_abort_callback)(void * data);
ggml_abort_callback = CFUNCTYPE(c_bool, c_void_p)
# ggml.h: typedef void (*ggml_log_callback)(enum ggml_log_level level, const char * text,
#                                          void * user_data);
ggml_log_callback = CFUNCTYPE(None, c_int, c_char_p, c_void_p)
# ggml-backend.h: typedef bool (*ggml_backend_sched_eval_callback)(struct ggml_tensor * t, bool ask,
#                                                                  void * user_data);
ggml_backend_sched_eval_callback = CFUNCTYPE(c_bool, ggml_tensor_p, c_bool, c_void_p)
# ggml-opt.h: typedef void (*ggml_opt_epoch_callback)(bool train, ggml_opt_context_t opt_ctx,
#     ggml_opt_dataset_t dataset, ggml_opt_result_t result, int64_t ibatch, int64_t ibatch_max,
#     int64_t t_start_us);
ggml_opt_epoch_callback = CFUNCTYPE(
    None, c_bool, ggml_opt_context_t, ggml_opt_dataset_t, ggml_opt_result_t, c_int64, c_int64, c_int64
)
# ggml-opt.h: typedef struct ggml_opt_optimizer_params (*ggml_opt_get_optimizer_params)(void * userdata);
# Returns a struct by value, which a ctypes callback cannot do: kept as a raw pointer.
ggml_opt_get_optimizer_params = c_void_p

# typedef bool (*llama_progress_callback)(float progress, void * user_data);
llama_progress_callback = CFUNCTYPE(c_bool, c_float, c_void_p)
# typedef void (*llama_model_set_tensor_data_t)(struct ggml_tensor * tensor, void * userdata);
llama_model_set_tensor_data_t = CFUNCTYPE(None, ggml_tensor_p, c_void_p)
# typedef bool (*llama_opt_param_filter)(const struct ggml_tensor * tensor, void * userdata);
llama_opt_param_filter = CFUNCTYPE(c_bool, ggml_tensor_p, c_void_p)

# ---------------------------------------------------------------------------
# Structs
# ---------------------------------------------------------------------------


class llama_token_data(Structure):
    _fields_ = [
        ("id", llama_token),  # token id
        ("logit", c_float),  # log-odds of the token
        ("p", c_float),  # probability of the token
    ]


class llama_token_data_array(Structure):
    _fields_ = [
        ("data", POINTER(llama_token_data)),  # may be modified by the samplers
        ("size", c_size_t),
        ("selected", c_int64),  # index into data (not the token id)
        ("sorted", c_bool),
    ]


class llama_batch(Structure):
    """Input for llama_encode/llama_decode; every array has n_tokens entries."""

    _fields_ = [
        ("n_tokens", c_int32),
        ("token", POINTER(llama_token)),
        ("embd", POINTER(c_float)),
        ("pos", POINTER(llama_pos)),
        ("n_seq_id", POINTER(c_int32)),
        ("seq_id", POINTER(POINTER(llama_seq_id))),
        ("logits", POINTER(c_int8)),  # nonzero: output logits/embeddings for this token
    ]


class llama_model_kv_override_value(Union):
    """The anonymous union inside llama_model_kv_override."""

    _fields_ = [
        ("val_i64", c_int64),
        ("val_f64", c_double),
        ("val_bool", c_bool),
        ("val_str", c_char * 128),
    ]


class llama_model_kv_override(Structure):
    _anonymous_ = ("value",)
    _fields_ = [
        ("tag", c_int),  # enum llama_model_kv_override_type
        ("key", c_char * 128),
        ("value", llama_model_kv_override_value),  # anonymous in C: val_i64 ... are direct members
    ]


class llama_model_tensor_buft_override(Structure):
    _fields_ = [
        ("pattern", c_char_p),
        ("buft", ggml_backend_buffer_type_t),
    ]


class llama_model_params(Structure):
    _fields_ = [
        ("devices", POINTER(ggml_backend_dev_t)),  # NULL-terminated; NULL = all available
        ("tensor_buft_overrides", POINTER(llama_model_tensor_buft_override)),  # NULL-terminated
        ("n_gpu_layers", c_int32),  # negative = all layers
        ("split_mode", c_int),  # enum llama_split_mode
        ("load_mode", c_int),  # enum llama_load_mode
        ("lazy_mode", c_int),  # enum llama_lazy_mode
        ("main_gpu", c_int32),
        ("tensor_split", POINTER(c_float)),  # size llama_max_devices()
        ("progress_callback", llama_progress_callback),
        ("progress_callback_user_data", c_void_p),
        ("kv_overrides", POINTER(llama_model_kv_override)),
        ("vocab_only", c_bool),
        ("check_tensors", c_bool),
        ("use_extra_bufts", c_bool),
        ("no_host", c_bool),
        ("no_alloc", c_bool),
        ("load_mtp", c_bool),
    ]


class llama_sampler_seq_config(Structure):
    _fields_ = [
        ("seq_id", llama_seq_id),
        ("sampler", llama_sampler_p),
    ]


class llama_context_params(Structure):
    _fields_ = [
        ("n_ctx", c_uint32),  # 0 = from model
        ("n_batch", c_uint32),  # logical max batch size for llama_decode
        ("n_ubatch", c_uint32),  # physical max batch size
        ("n_seq_max", c_uint32),
        ("n_rs_seq", c_uint32),  # recurrent-state snapshots per seq for rollback [EXPERIMENTAL]
        ("n_outputs_max", c_uint32),  # 0 = n_batch
        ("n_outputs_max_per_seq", c_uint32),  # 0 = n_outputs_max
        ("n_threads", c_int32),
        ("n_threads_batch", c_int32),
        ("ctx_type", c_int),  # enum llama_context_type
        ("rope_scaling_type", c_int),  # enum llama_rope_scaling_type
        ("pooling_type", c_int),  # enum llama_pooling_type
        ("attention_type", c_int),  # enum llama_attention_type
        ("flash_attn_type", c_int),  # enum llama_flash_attn_type
        ("rope_freq_base", c_float),
        ("rope_freq_scale", c_float),
        ("yarn_ext_factor", c_float),
        ("yarn_attn_factor", c_float),
        ("yarn_beta_fast", c_float),
        ("yarn_beta_slow", c_float),
        ("yarn_orig_ctx", c_uint32),
        ("defrag_thold", c_float),  # [DEPRECATED]
        ("cb_eval", ggml_backend_sched_eval_callback),
        ("cb_eval_user_data", c_void_p),
        ("type_k", c_int),  # enum ggml_type [EXPERIMENTAL]
        ("type_v", c_int),  # enum ggml_type [EXPERIMENTAL]
        ("abort_callback", ggml_abort_callback),
        ("abort_callback_data", c_void_p),
        ("embeddings", c_bool),
        ("offload_kqv", c_bool),
        ("no_perf", c_bool),
        ("op_offload", c_bool),
        ("swa_full", c_bool),
        ("kv_unified", c_bool),
        ("samplers", POINTER(llama_sampler_seq_config)),  # [EXPERIMENTAL] backend sampler chains
        ("n_samplers", c_size_t),
        ("ctx_other", llama_context_p),
    ]


class llama_model_tensor_override(Structure):
    _fields_ = [
        ("pattern", c_char_p),
        ("type", c_int),  # enum ggml_type
    ]


class llama_model_imatrix_data(Structure):
    _fields_ = [
        ("name", c_char_p),
        ("data", POINTER(c_float)),
        ("size", c_size_t),
    ]


class llama_model_quantize_params(Structure):
    _fields_ = [
        ("nthread", c_int32),  # <= 0: std::thread::hardware_concurrency()
        ("ftype", c_int),  # enum llama_ftype
        ("output_tensor_type", c_int),  # enum ggml_type
        ("token_embedding_type", c_int),  # enum ggml_type
        ("allow_requantize", c_bool),
        ("quantize_output_tensor", c_bool),
        ("only_copy", c_bool),
        ("pure", c_bool),
        ("keep_split", c_bool),
        ("dry_run", c_bool),
        ("imatrix", POINTER(llama_model_imatrix_data)),
        ("kv_overrides", POINTER(llama_model_kv_override)),
        ("tt_overrides", POINTER(llama_model_tensor_override)),
        ("prune_layers", POINTER(c_int32)),
        ("max_buf_size", c_size_t),  # 0 = default (8 GiB)
    ]


class llama_logit_bias(Structure):
    _fields_ = [
        ("token", llama_token),
        ("bias", c_float),
    ]


class llama_sampler_chain_params(Structure):
    _fields_ = [
        ("no_perf", c_bool),
    ]


class llama_chat_message(Structure):
    _fields_ = [
        ("role", c_char_p),
        ("content", c_char_p),
    ]


class llama_sampler_data(Structure):
    _fields_ = [
        ("logits", ggml_tensor_p),
        ("probs", ggml_tensor_p),
        ("sampled", ggml_tensor_p),
        ("candidates", ggml_tensor_p),
    ]


# function-pointer members of struct llama_sampler_i
# (name returns an address rather than c_char_p so that a Python implementation
# can return the address of a buffer it keeps alive)
llama_sampler_i_name = CFUNCTYPE(c_void_p, llama_sampler_p)
llama_sampler_i_accept = CFUNCTYPE(None, llama_sampler_p, llama_token)
llama_sampler_i_apply = CFUNCTYPE(None, llama_sampler_p, POINTER(llama_token_data_array))
llama_sampler_i_reset = CFUNCTYPE(None, llama_sampler_p)
llama_sampler_i_clone = CFUNCTYPE(llama_sampler_p, llama_sampler_p)
llama_sampler_i_free = CFUNCTYPE(None, llama_sampler_p)
llama_sampler_i_backend_init = CFUNCTYPE(c_bool, llama_sampler_p, ggml_backend_buffer_type_t, c_uint32)
llama_sampler_i_backend_accept = CFUNCTYPE(
    None, llama_sampler_p, ggml_context_p, ggml_cgraph_p, ggml_tensor_p
)
llama_sampler_i_backend_apply = CFUNCTYPE(
    None, llama_sampler_p, ggml_context_p, ggml_cgraph_p, POINTER(llama_sampler_data)
)
llama_sampler_i_backend_set_input = CFUNCTYPE(None, llama_sampler_p)
llama_sampler_i_backend_reset = CFUNCTYPE(None, llama_sampler_p)
llama_sampler_i_copy_state = CFUNCTYPE(None, llama_sampler_p, llama_sampler_p)


class llama_sampler_i(Structure):
    """Interface of a custom sampler (a table of function pointers)."""

    _fields_ = [
        ("name", llama_sampler_i_name),  # can be NULL
        ("accept", llama_sampler_i_accept),  # can be NULL
        ("apply", llama_sampler_i_apply),  # required
        ("reset", llama_sampler_i_reset),  # can be NULL
        ("clone", llama_sampler_i_clone),  # can be NULL if ctx is NULL
        ("free", llama_sampler_i_free),  # can be NULL if ctx is NULL
        # [EXPERIMENTAL] backend sampling interface
        ("backend_init", llama_sampler_i_backend_init),
        ("backend_accept", llama_sampler_i_backend_accept),
        ("backend_apply", llama_sampler_i_backend_apply),
        ("backend_set_input", llama_sampler_i_backend_set_input),
        ("backend_reset", llama_sampler_i_backend_reset),
        ("copy_state", llama_sampler_i_copy_state),
    ]


class llama_sampler(Structure):
    _fields_ = [
        ("iface", POINTER(llama_sampler_i)),
        ("ctx", llama_sampler_context_t),
    ]


class llama_perf_context_data(Structure):
    _fields_ = [
        ("t_start_ms", c_double),  # absolute start time
        ("t_load_ms", c_double),  # model loading
        ("t_p_eval_ms", c_double),  # prompt processing
        ("t_eval_ms", c_double),  # token generation
        ("n_p_eval", c_int32),  # prompt tokens
        ("n_eval", c_int32),  # generated tokens
        ("n_reused", c_int32),  # times a compute graph was reused
    ]


class llama_perf_sampler_data(Structure):
    _fields_ = [
        ("t_sample_ms", c_double),
        ("n_sample", c_int32),
    ]


class llama_opt_params(Structure):
    _fields_ = [
        ("n_ctx_train", c_uint32),  # 0 = context size of the llama_context
        ("param_filter", llama_opt_param_filter),
        ("param_filter_ud", c_void_p),
        ("get_opt_pars", ggml_opt_get_optimizer_params),
        ("get_opt_pars_ud", c_void_p),
        ("optimizer_type", c_int),  # enum ggml_opt_optimizer_type
    ]


# ggml-backend.h structs, for device reporting


class ggml_backend_dev_caps(Structure):
    _fields_ = [
        ("async", c_bool),
        ("host_buffer", c_bool),
        ("buffer_from_host_ptr", c_bool),
        ("events", c_bool),
        ("mmap_support", c_bool),
    ]


class ggml_backend_dev_props(Structure):
    _fields_ = [
        ("name", c_char_p),
        ("description", c_char_p),
        ("memory_free", c_size_t),
        ("memory_total", c_size_t),
        ("type", c_int),  # enum ggml_backend_dev_type
        ("device_id", c_char_p),  # PCI bus id or NULL
        ("caps", ggml_backend_dev_caps),
    ]


#: ``ggml_backend_rpc_add_server`` (ggml-rpc.h), reached through the RPC registry's proc address
#: so that a build without the RPC backend still loads.
ggml_backend_rpc_add_server_t = CFUNCTYPE(ggml_backend_reg_t, c_char_p)


#: every Structure declared here, keyed by its C struct name (the layout test walks this)
STRUCTS: dict[str, type[Structure]] = {
    cls.__name__: cls
    for cls in (
        llama_token_data,
        llama_token_data_array,
        llama_batch,
        llama_model_kv_override,
        llama_model_tensor_buft_override,
        llama_model_params,
        llama_sampler_seq_config,
        llama_context_params,
        llama_model_tensor_override,
        llama_model_imatrix_data,
        llama_model_quantize_params,
        llama_logit_bias,
        llama_sampler_chain_params,
        llama_chat_message,
        llama_sampler_data,
        llama_sampler_i,
        llama_sampler,
        llama_perf_context_data,
        llama_perf_sampler_data,
        llama_opt_params,
        ggml_backend_dev_caps,
        ggml_backend_dev_props,
    )
}

# ---------------------------------------------------------------------------
# Function prototypes (libllama): name -> (argtypes, restype)
# ---------------------------------------------------------------------------

_P = POINTER
Prototype = tuple[list[Any], Any]

FUNCTIONS: dict[str, Prototype] = {
    # --- enum names / version
    "llama_ftype_name": ([c_int], c_char_p),
    "llama_flash_attn_type_name": ([c_int], c_char_p),
    "llama_load_mode_name": ([c_int], c_char_p),
    "llama_load_mode_from_str": ([c_char_p], c_int),
    "llama_version": ([], c_char_p),
    # --- default parameters
    "llama_model_default_params": ([], llama_model_params),
    "llama_context_default_params": ([], llama_context_params),
    "llama_sampler_chain_default_params": ([], llama_sampler_chain_params),
    "llama_model_quantize_default_params": ([], llama_model_quantize_params),
    # --- backend
    "llama_backend_init": ([], None),
    "llama_backend_free": ([], None),
    "llama_numa_init": ([c_int], None),
    "llama_attach_threadpool": ([llama_context_p, ggml_threadpool_t, ggml_threadpool_t], None),
    "llama_detach_threadpool": ([llama_context_p], None),
    # --- model loading / context creation
    "llama_model_init_from_user": (
        [gguf_context_p, llama_model_set_tensor_data_t, c_void_p, llama_model_params],
        llama_model_p,
    ),
    "llama_load_model_from_file": ([c_char_p, llama_model_params], llama_model_p),  # deprecated
    "llama_model_load_from_file": ([c_char_p, llama_model_params], llama_model_p),
    "llama_model_load_from_file_ptr": ([FILE_p, llama_model_params], llama_model_p),
    "llama_model_load_from_splits": ([_P(c_char_p), c_size_t, llama_model_params], llama_model_p),
    "llama_model_save_to_file": ([llama_model_p, c_char_p], None),
    "llama_free_model": ([llama_model_p], None),  # deprecated
    "llama_model_free": ([llama_model_p], None),
    "llama_init_from_model": ([llama_model_p, llama_context_params], llama_context_p),
    "llama_new_context_with_model": ([llama_model_p, llama_context_params], llama_context_p),  # deprecated
    "llama_free": ([llama_context_p], None),
    # --- system
    "llama_time_us": ([], c_int64),
    "llama_max_devices": ([], c_size_t),
    "llama_max_parallel_sequences": ([], c_size_t),
    "llama_max_tensor_buft_overrides": ([], c_size_t),
    "llama_supports_mmap": ([], c_bool),
    "llama_supports_mlock": ([], c_bool),
    "llama_supports_gpu_offload": ([], c_bool),
    "llama_supports_rpc": ([], c_bool),
    # --- context queries
    "llama_n_ctx": ([llama_context_p], c_uint32),
    "llama_n_ctx_seq": ([llama_context_p], c_uint32),
    "llama_n_batch": ([llama_context_p], c_uint32),
    "llama_n_ubatch": ([llama_context_p], c_uint32),
    "llama_n_seq_max": ([llama_context_p], c_uint32),
    "llama_n_rs_seq": ([llama_context_p], c_uint32),
    "llama_n_ctx_train": ([llama_model_p], c_int32),  # deprecated
    "llama_n_embd": ([llama_model_p], c_int32),  # deprecated
    "llama_n_layer": ([llama_model_p], c_int32),  # deprecated
    "llama_n_head": ([llama_model_p], c_int32),  # deprecated
    "llama_n_vocab": ([llama_vocab_p], c_int32),  # deprecated
    "llama_get_model": ([llama_context_p], llama_model_p),
    "llama_get_memory": ([llama_context_p], llama_memory_t),
    "llama_pooling_type": ([llama_context_p], c_int),
    # --- model queries
    "llama_model_get_vocab": ([llama_model_p], llama_vocab_p),
    "llama_model_rope_type": ([llama_model_p], c_int),
    "llama_model_n_ctx_train": ([llama_model_p], c_int32),
    "llama_model_n_embd": ([llama_model_p], c_int32),
    "llama_model_n_embd_inp": ([llama_model_p], c_int32),
    "llama_model_n_embd_out": ([llama_model_p], c_int32),
    "llama_model_n_layer": ([llama_model_p], c_int32),
    "llama_model_n_layer_nextn": ([llama_model_p], c_int32),
    "llama_model_n_head": ([llama_model_p], c_int32),
    "llama_model_n_head_kv": ([llama_model_p], c_int32),
    "llama_model_n_swa": ([llama_model_p], c_int32),
    "llama_model_rope_freq_scale_train": ([llama_model_p], c_float),
    "llama_model_n_cls_out": ([llama_model_p], c_uint32),
    "llama_model_cls_label": ([llama_model_p, c_uint32], c_char_p),
    "llama_vocab_type": ([llama_vocab_p], c_int),
    "llama_vocab_n_tokens": ([llama_vocab_p], c_int32),
    # --- model GGUF metadata
    "llama_model_meta_val_str": ([llama_model_p, c_char_p, c_char_p, c_size_t], c_int32),
    "llama_model_meta_count": ([llama_model_p], c_int32),
    "llama_model_meta_key_str": ([c_int], c_char_p),
    "llama_model_meta_key_by_index": ([llama_model_p, c_int32, c_char_p, c_size_t], c_int32),
    "llama_model_meta_val_str_by_index": ([llama_model_p, c_int32, c_char_p, c_size_t], c_int32),
    "llama_model_desc": ([llama_model_p, c_char_p, c_size_t], c_int32),
    "llama_model_ftype": ([llama_model_p], c_int),
    "llama_model_size": ([llama_model_p], c_uint64),
    "llama_model_chat_template": ([llama_model_p, c_char_p], c_char_p),
    "llama_model_n_params": ([llama_model_p], c_uint64),
    "llama_model_has_encoder": ([llama_model_p], c_bool),
    "llama_model_has_decoder": ([llama_model_p], c_bool),
    "llama_model_decoder_start_token": ([llama_model_p], llama_token),
    "llama_model_is_recurrent": ([llama_model_p], c_bool),
    "llama_model_is_hybrid": ([llama_model_p], c_bool),
    "llama_model_is_diffusion": ([llama_model_p], c_bool),
    "llama_model_quantize": ([c_char_p, c_char_p, _P(llama_model_quantize_params)], c_uint32),
    # --- adapters
    "llama_adapter_lora_init": ([llama_model_p, c_char_p], llama_adapter_lora_p),
    "llama_adapter_lora_init_from_file_ptr": ([llama_model_p, FILE_p], llama_adapter_lora_p),
    "llama_adapter_meta_val_str": ([llama_adapter_lora_p, c_char_p, c_char_p, c_size_t], c_int32),
    "llama_adapter_meta_count": ([llama_adapter_lora_p], c_int32),
    "llama_adapter_meta_key_by_index": ([llama_adapter_lora_p, c_int32, c_char_p, c_size_t], c_int32),
    "llama_adapter_meta_val_str_by_index": ([llama_adapter_lora_p, c_int32, c_char_p, c_size_t], c_int32),
    "llama_adapter_lora_free": ([llama_adapter_lora_p], None),
    "llama_adapter_get_alora_n_invocation_tokens": ([llama_adapter_lora_p], c_uint64),
    "llama_adapter_get_alora_invocation_tokens": ([llama_adapter_lora_p], _P(llama_token)),
    "llama_set_adapters_lora": (
        [llama_context_p, _P(llama_adapter_lora_p), c_size_t, _P(c_float)],
        c_int32,
    ),
    "llama_set_adapter_cvec": (
        [llama_context_p, _P(c_float), c_size_t, c_int32, c_int32, c_int32],
        c_int32,
    ),
    # --- memory
    "llama_memory_clear": ([llama_memory_t, c_bool], None),
    "llama_memory_seq_rm": ([llama_memory_t, llama_seq_id, llama_pos, llama_pos], c_bool),
    "llama_memory_seq_cp": ([llama_memory_t, llama_seq_id, llama_seq_id, llama_pos, llama_pos], None),
    "llama_memory_seq_keep": ([llama_memory_t, llama_seq_id], None),
    "llama_memory_seq_add": ([llama_memory_t, llama_seq_id, llama_pos, llama_pos, llama_pos], None),
    "llama_memory_seq_div": ([llama_memory_t, llama_seq_id, llama_pos, llama_pos, c_int], None),
    "llama_memory_seq_pos_min": ([llama_memory_t, llama_seq_id], llama_pos),
    "llama_memory_seq_pos_max": ([llama_memory_t, llama_seq_id], llama_pos),
    "llama_memory_can_shift": ([llama_memory_t], c_bool),
    # --- state / sessions
    "llama_state_get_size": ([llama_context_p], c_size_t),
    "llama_get_state_size": ([llama_context_p], c_size_t),  # deprecated
    "llama_state_get_data": ([llama_context_p, _P(c_uint8), c_size_t], c_size_t),
    "llama_copy_state_data": ([llama_context_p, _P(c_uint8)], c_size_t),  # deprecated
    "llama_state_set_data": ([llama_context_p, _P(c_uint8), c_size_t], c_size_t),
    "llama_set_state_data": ([llama_context_p, _P(c_uint8)], c_size_t),  # deprecated
    "llama_state_load_file": (
        [llama_context_p, c_char_p, _P(llama_token), c_size_t, _P(c_size_t)],
        c_bool,
    ),
    "llama_load_session_file": (  # deprecated
        [llama_context_p, c_char_p, _P(llama_token), c_size_t, _P(c_size_t)],
        c_bool,
    ),
    "llama_state_save_file": ([llama_context_p, c_char_p, _P(llama_token), c_size_t], c_bool),
    "llama_save_session_file": ([llama_context_p, c_char_p, _P(llama_token), c_size_t], c_bool),  # deprecated
    "llama_state_seq_get_size": ([llama_context_p, llama_seq_id], c_size_t),
    "llama_state_seq_get_data": ([llama_context_p, _P(c_uint8), c_size_t, llama_seq_id], c_size_t),
    "llama_state_seq_set_data": ([llama_context_p, _P(c_uint8), c_size_t, llama_seq_id], c_size_t),
    "llama_state_seq_save_file": (
        [llama_context_p, c_char_p, llama_seq_id, _P(llama_token), c_size_t],
        c_size_t,
    ),
    "llama_state_seq_load_file": (
        [llama_context_p, c_char_p, llama_seq_id, _P(llama_token), c_size_t, _P(c_size_t)],
        c_size_t,
    ),
    "llama_state_seq_get_size_ext": ([llama_context_p, llama_seq_id, llama_state_seq_flags], c_size_t),
    "llama_state_seq_get_data_ext": (
        [llama_context_p, _P(c_uint8), c_size_t, llama_seq_id, llama_state_seq_flags],
        c_size_t,
    ),
    "llama_state_seq_set_data_ext": (
        [llama_context_p, _P(c_uint8), c_size_t, llama_seq_id, llama_state_seq_flags],
        c_size_t,
    ),
    # --- decoding
    "llama_batch_get_one": ([_P(llama_token), c_int32], llama_batch),
    "llama_batch_init": ([c_int32, c_int32, c_int32], llama_batch),
    "llama_batch_free": ([llama_batch], None),
    "llama_encode": ([llama_context_p, llama_batch], c_int32),
    "llama_decode": ([llama_context_p, llama_batch], c_int32),
    "llama_set_n_threads": ([llama_context_p, c_int32, c_int32], None),
    "llama_n_threads": ([llama_context_p], c_int32),
    "llama_n_threads_batch": ([llama_context_p], c_int32),
    "llama_set_embeddings": ([llama_context_p, c_bool], None),
    "llama_set_causal_attn": ([llama_context_p, c_bool], None),
    "llama_set_warmup": ([llama_context_p, c_bool], None),  # deprecated
    "llama_set_abort_callback": ([llama_context_p, ggml_abort_callback, c_void_p], None),
    "llama_synchronize": ([llama_context_p], None),
    "llama_get_logits": ([llama_context_p], _P(c_float)),
    "llama_get_logits_ith": ([llama_context_p, c_int32], _P(c_float)),
    "llama_get_embeddings": ([llama_context_p], _P(c_float)),
    "llama_get_embeddings_ith": ([llama_context_p, c_int32], _P(c_float)),
    "llama_get_embeddings_seq": ([llama_context_p, llama_seq_id], _P(c_float)),
    # --- backend sampling [EXPERIMENTAL]
    "llama_get_sampled_token_ith": ([llama_context_p, c_int32], llama_token),
    "llama_get_sampled_probs_ith": ([llama_context_p, c_int32], _P(c_float)),
    "llama_get_sampled_probs_count_ith": ([llama_context_p, c_int32], c_uint32),
    "llama_get_sampled_logits_ith": ([llama_context_p, c_int32], _P(c_float)),
    "llama_get_sampled_logits_count_ith": ([llama_context_p, c_int32], c_uint32),
    "llama_get_sampled_candidates_ith": ([llama_context_p, c_int32], _P(llama_token)),
    "llama_get_sampled_candidates_count_ith": ([llama_context_p, c_int32], c_uint32),
    # --- vocab
    "llama_vocab_get_text": ([llama_vocab_p, llama_token], c_char_p),
    "llama_vocab_get_score": ([llama_vocab_p, llama_token], c_float),
    "llama_vocab_get_attr": ([llama_vocab_p, llama_token], c_int),
    "llama_vocab_is_eog": ([llama_vocab_p, llama_token], c_bool),
    "llama_vocab_is_control": ([llama_vocab_p, llama_token], c_bool),
    "llama_vocab_bos": ([llama_vocab_p], llama_token),
    "llama_vocab_eos": ([llama_vocab_p], llama_token),
    "llama_vocab_eot": ([llama_vocab_p], llama_token),
    "llama_vocab_sep": ([llama_vocab_p], llama_token),
    "llama_vocab_nl": ([llama_vocab_p], llama_token),
    "llama_vocab_pad": ([llama_vocab_p], llama_token),
    "llama_vocab_mask": ([llama_vocab_p], llama_token),
    "llama_vocab_get_add_bos": ([llama_vocab_p], c_bool),
    "llama_vocab_get_add_eos": ([llama_vocab_p], c_bool),
    "llama_vocab_get_add_sep": ([llama_vocab_p], c_bool),
    "llama_vocab_get_suppress_tokens": ([llama_vocab_p, _P(c_int32)], _P(llama_token)),
    "llama_vocab_fim_pre": ([llama_vocab_p], llama_token),
    "llama_vocab_fim_suf": ([llama_vocab_p], llama_token),
    "llama_vocab_fim_mid": ([llama_vocab_p], llama_token),
    "llama_vocab_fim_pad": ([llama_vocab_p], llama_token),
    "llama_vocab_fim_rep": ([llama_vocab_p], llama_token),
    "llama_vocab_fim_sep": ([llama_vocab_p], llama_token),
    # deprecated vocab aliases
    "llama_token_get_text": ([llama_vocab_p, llama_token], c_char_p),
    "llama_token_get_score": ([llama_vocab_p, llama_token], c_float),
    "llama_token_get_attr": ([llama_vocab_p, llama_token], c_int),
    "llama_token_is_eog": ([llama_vocab_p, llama_token], c_bool),
    "llama_token_is_control": ([llama_vocab_p, llama_token], c_bool),
    "llama_token_bos": ([llama_vocab_p], llama_token),
    "llama_token_eos": ([llama_vocab_p], llama_token),
    "llama_token_eot": ([llama_vocab_p], llama_token),
    "llama_token_cls": ([llama_vocab_p], llama_token),
    "llama_token_sep": ([llama_vocab_p], llama_token),
    "llama_token_nl": ([llama_vocab_p], llama_token),
    "llama_token_pad": ([llama_vocab_p], llama_token),
    "llama_add_bos_token": ([llama_vocab_p], c_bool),
    "llama_add_eos_token": ([llama_vocab_p], c_bool),
    "llama_token_fim_pre": ([llama_vocab_p], llama_token),
    "llama_token_fim_suf": ([llama_vocab_p], llama_token),
    "llama_token_fim_mid": ([llama_vocab_p], llama_token),
    "llama_token_fim_pad": ([llama_vocab_p], llama_token),
    "llama_token_fim_rep": ([llama_vocab_p], llama_token),
    "llama_token_fim_sep": ([llama_vocab_p], llama_token),
    "llama_vocab_cls": ([llama_vocab_p], llama_token),
    # --- tokenization
    "llama_tokenize": (
        [llama_vocab_p, c_char_p, c_int32, _P(llama_token), c_int32, c_bool, c_bool],
        c_int32,
    ),
    "llama_token_to_piece": ([llama_vocab_p, llama_token, c_char_p, c_int32, c_int32, c_bool], c_int32),
    "llama_detokenize": (
        [llama_vocab_p, _P(llama_token), c_int32, c_char_p, c_int32, c_bool, c_bool],
        c_int32,
    ),
    # --- chat templates
    "llama_chat_apply_template": (
        [c_char_p, _P(llama_chat_message), c_size_t, c_bool, c_char_p, c_int32],
        c_int32,
    ),
    "llama_chat_builtin_templates": ([_P(c_char_p), c_size_t], c_int32),
    # --- sampling
    "llama_set_sampler": ([llama_context_p, llama_seq_id, llama_sampler_p], c_bool),
    "llama_sampler_init": ([_P(llama_sampler_i), llama_sampler_context_t], llama_sampler_p),
    "llama_sampler_name": ([llama_sampler_p], c_char_p),
    "llama_sampler_accept": ([llama_sampler_p, llama_token], None),
    "llama_sampler_apply": ([llama_sampler_p, _P(llama_token_data_array)], None),
    "llama_sampler_reset": ([llama_sampler_p], None),
    "llama_sampler_clone": ([llama_sampler_p], llama_sampler_p),
    "llama_sampler_copy": ([llama_sampler_p, llama_sampler_p], None),
    "llama_sampler_free": ([llama_sampler_p], None),
    "llama_sampler_chain_init": ([llama_sampler_chain_params], llama_sampler_p),
    "llama_sampler_chain_add": ([llama_sampler_p, llama_sampler_p], None),
    "llama_sampler_chain_get": ([llama_sampler_p, c_int32], llama_sampler_p),
    "llama_sampler_chain_n": ([llama_sampler_p], c_int32),
    "llama_sampler_chain_remove": ([llama_sampler_p, c_int32], llama_sampler_p),
    "llama_sampler_init_greedy": ([], llama_sampler_p),
    "llama_sampler_init_dist": ([c_uint32], llama_sampler_p),
    "llama_sampler_init_top_k": ([c_int32], llama_sampler_p),
    "llama_sampler_init_top_p": ([c_float, c_size_t], llama_sampler_p),
    "llama_sampler_init_min_p": ([c_float, c_size_t], llama_sampler_p),
    "llama_sampler_init_typical": ([c_float, c_size_t], llama_sampler_p),
    "llama_sampler_init_temp": ([c_float], llama_sampler_p),
    "llama_sampler_init_temp_ext": ([c_float, c_float, c_float], llama_sampler_p),
    "llama_sampler_init_xtc": ([c_float, c_float, c_size_t, c_uint32], llama_sampler_p),
    "llama_sampler_init_top_n_sigma": ([c_float], llama_sampler_p),
    "llama_sampler_init_mirostat": ([c_int32, c_uint32, c_float, c_float, c_int32], llama_sampler_p),
    "llama_sampler_init_mirostat_v2": ([c_uint32, c_float, c_float], llama_sampler_p),
    "llama_sampler_init_grammar": ([llama_vocab_p, c_char_p, c_char_p], llama_sampler_p),
    "llama_sampler_init_grammar_lazy": (  # deprecated
        [llama_vocab_p, c_char_p, c_char_p, _P(c_char_p), c_size_t, _P(llama_token), c_size_t],
        llama_sampler_p,
    ),
    "llama_sampler_init_grammar_lazy_patterns": (
        [llama_vocab_p, c_char_p, c_char_p, _P(c_char_p), c_size_t, _P(llama_token), c_size_t],
        llama_sampler_p,
    ),
    "llama_sampler_init_penalties": ([c_int32, c_int32, c_float, c_float, c_float], llama_sampler_p),
    "llama_sampler_init_dry": (
        [llama_vocab_p, c_float, c_float, c_int32, c_int32, _P(c_char_p), c_size_t],
        llama_sampler_p,
    ),
    "llama_sampler_init_adaptive_p": ([c_float, c_float, c_uint32], llama_sampler_p),
    "llama_sampler_init_logit_bias": ([c_int32, c_int32, _P(llama_logit_bias)], llama_sampler_p),
    "llama_sampler_init_infill": ([llama_vocab_p], llama_sampler_p),
    "llama_sampler_get_seed": ([llama_sampler_p], c_uint32),
    "llama_sampler_sample": ([llama_sampler_p, llama_context_p, c_int32], llama_token),
    # --- model split
    "llama_split_path": ([c_char_p, c_size_t, c_char_p, c_int32, c_int32], c_int32),
    "llama_split_prefix": ([c_char_p, c_size_t, c_char_p, c_int32, c_int32], c_int32),
    # --- system info / logging
    "llama_print_system_info": ([], c_char_p),
    "llama_log_get": ([_P(ggml_log_callback), _P(c_void_p)], None),
    "llama_log_set": ([ggml_log_callback, c_void_p], None),
    # --- performance
    "llama_perf_context": ([llama_context_p], llama_perf_context_data),
    "llama_perf_context_print": ([llama_context_p], None),
    "llama_perf_context_reset": ([llama_context_p], None),
    "llama_perf_sampler": ([llama_sampler_p], llama_perf_sampler_data),
    "llama_perf_sampler_print": ([llama_sampler_p], None),
    "llama_perf_sampler_reset": ([llama_sampler_p], None),
    # --- training
    "llama_opt_param_filter_all": ([ggml_tensor_p, c_void_p], c_bool),
    "llama_opt_init": ([llama_context_p, llama_model_p, llama_opt_params], None),
    "llama_opt_epoch": (
        [
            llama_context_p,
            ggml_opt_dataset_t,
            ggml_opt_result_t,
            ggml_opt_result_t,
            c_int64,
            ggml_opt_epoch_callback,
            ggml_opt_epoch_callback,
        ],
        None,
    ),
}

#: functions of FUNCTIONS that llama.h wraps in DEPRECATED(...): bound, but not for new code
DEPRECATED_FUNCTIONS: frozenset[str] = frozenset(
    {
        "llama_load_model_from_file",
        "llama_free_model",
        "llama_new_context_with_model",
        "llama_n_ctx_train",
        "llama_n_embd",
        "llama_n_layer",
        "llama_n_head",
        "llama_n_vocab",
        "llama_get_state_size",
        "llama_copy_state_data",
        "llama_set_state_data",
        "llama_load_session_file",
        "llama_save_session_file",
        "llama_set_warmup",
        "llama_token_get_text",
        "llama_token_get_score",
        "llama_token_get_attr",
        "llama_token_is_eog",
        "llama_token_is_control",
        "llama_token_bos",
        "llama_token_eos",
        "llama_token_eot",
        "llama_token_cls",
        "llama_token_sep",
        "llama_token_nl",
        "llama_token_pad",
        "llama_add_bos_token",
        "llama_add_eos_token",
        "llama_token_fim_pre",
        "llama_token_fim_suf",
        "llama_token_fim_mid",
        "llama_token_fim_pad",
        "llama_token_fim_rep",
        "llama_token_fim_sep",
        "llama_vocab_cls",
        "llama_sampler_init_grammar_lazy",
    }
)

# ---------------------------------------------------------------------------
# ggml-backend.h functions for device reporting (libggml / libggml-base)
# ---------------------------------------------------------------------------
# The registry functions (ggml_backend_reg_count, ggml_backend_dev_count,
# ggml_backend_load_all ...) live in libggml; the per-device/per-reg accessors
# (ggml_backend_dev_name ...) in libggml-base.  dlsym on a library handle also
# searches its dependencies, so binding against libggml (or libllama) finds both.

GGML_FUNCTIONS: dict[str, Prototype] = {
    # devices
    "ggml_backend_dev_name": ([ggml_backend_dev_t], c_char_p),
    "ggml_backend_dev_description": ([ggml_backend_dev_t], c_char_p),
    "ggml_backend_dev_memory": ([ggml_backend_dev_t, _P(c_size_t), _P(c_size_t)], None),
    "ggml_backend_dev_type": ([ggml_backend_dev_t], c_int),
    "ggml_backend_dev_get_props": ([ggml_backend_dev_t, _P(ggml_backend_dev_props)], None),
    "ggml_backend_dev_backend_reg": ([ggml_backend_dev_t], ggml_backend_reg_t),
    # backend registrations
    "ggml_backend_reg_name": ([ggml_backend_reg_t], c_char_p),
    "ggml_backend_reg_dev_count": ([ggml_backend_reg_t], c_size_t),
    "ggml_backend_reg_dev_get": ([ggml_backend_reg_t, c_size_t], ggml_backend_dev_t),
    # registry
    "ggml_backend_reg_count": ([], c_size_t),
    "ggml_backend_reg_get": ([c_size_t], ggml_backend_reg_t),
    "ggml_backend_reg_by_name": ([c_char_p], ggml_backend_reg_t),
    "ggml_backend_dev_count": ([], c_size_t),
    "ggml_backend_dev_get": ([c_size_t], ggml_backend_dev_t),
    "ggml_backend_dev_by_name": ([c_char_p], ggml_backend_dev_t),
    "ggml_backend_dev_by_type": ([c_int], ggml_backend_dev_t),
    "ggml_backend_register": ([ggml_backend_reg_t], None),
    "ggml_backend_reg_get_proc_address": ([ggml_backend_reg_t, c_char_p], c_void_p),
    # dynamic backend loading (GGML_BACKEND_DL builds)
    "ggml_backend_load": ([c_char_p], ggml_backend_reg_t),
    "ggml_backend_load_all": ([], None),
    "ggml_backend_load_all_from_path": ([c_char_p], None),
}


def bind(lib: ctypes.CDLL, table: dict[str, Prototype] = FUNCTIONS) -> list[str]:
    """Set ``argtypes``/``restype`` on every function of *table* that *lib* exports.

    Returns the names *lib* does not export (in table order); it never raises
    for a missing name, the caller decides what is fatal.
    """
    missing: list[str] = []
    for name, (argtypes, restype) in table.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        fn.argtypes = list(argtypes)
        fn.restype = restype
    return missing
