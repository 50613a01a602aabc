// Images and audio in prompts: exception-safe wrappers over libmtmd (upstream's tools/mtmd), and
// the checks llamact makes on media bytes before mtmd decodes them.
//
// mtmd is C++ behind a C API. Most entry points catch their own exceptions, but not all (the
// bitmap helpers, the chunk decode helper), and a few abort the process on misuse (GGML_ASSERT on a
// bad batch size or chunk type): Python validates those arguments first, and every call that runs
// mtmd's C++ goes through a guard here, so a failure is a return code and a message, never
// std::terminate in a ctypes frame.
//
// The probe reads only the header of an image (stb_image's info call, the same parser mtmd's
// decoder uses) and the length of an audio stream (miniaudio, as mtmd decodes it), so that a
// decompression bomb -- a few kilobytes that decode to gigabytes -- is refused before anything is
// allocated for its pixels or samples.

#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"
#include "shim_internal.h"

#include <cstdint>
#include <cstring>
#include <vector>

// Both decoders are compiled in privately (static functions): the probe must agree with the
// decoders mtmd links, which are these same headers from the pinned tree.
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO
#define STBI_NO_FAILURE_STRINGS
#include "stb/stb_image.h"

#define MINIAUDIO_IMPLEMENTATION
#define MA_NO_ENCODING
#define MA_NO_DEVICE_IO
#define MA_NO_RESOURCE_MANAGER
#define MA_NO_NODE_GRAPH
#define MA_NO_ENGINE
#define MA_NO_GENERATION
#define MA_API static
#include "miniaudio/miniaudio.h"

using llamact_shim::report;

namespace {

// mtmd's own audio detection (mtmd-helper.cpp is_audio_file): RIFF/WAVE, an ID3 tag or an MPEG
// sync word, fLaC. A buffer that passes is decoded as audio, anything else as an image.
bool looks_like_audio(const unsigned char * buf, size_t len) {
    if (len < 12) {
        return false;
    }
    const bool wav = std::memcmp(buf, "RIFF", 4) == 0 && std::memcmp(buf + 8, "WAVE", 4) == 0;
    const bool mp3 = std::memcmp(buf, "ID3", 3) == 0 || (buf[0] == 0xFF && (buf[1] & 0xE0) == 0xE0);
    const bool flac = std::memcmp(buf, "fLaC", 4) == 0;
    return wav || mp3 || flac;
}

}  // namespace

// What mtmd would make of `buf`: *kind = 1 (image: *width, *height from its header), 2 (audio:
// *frames at `sample_rate` Hz, mono, as mtmd resamples it; sample_rate <= 0 only classifies), or 0
// (neither: stb_image cannot read the header, or miniaudio cannot open the stream). Returns 0, or -1
// with `err` set.
LLAMACT_SHIM_API int32_t llamact_media_probe(const unsigned char * buf, size_t len, int32_t sample_rate,
                                             int32_t * kind, int32_t * width, int32_t * height, uint64_t * frames,
                                             char * err, size_t err_size) {
    try {
        *kind = 0;
        *width = *height = 0;
        *frames = 0;
        if (looks_like_audio(buf, len)) {
            if (sample_rate <= 0) {
                *kind = 2;
                return 0;
            }
            ma_decoder_config config = ma_decoder_config_init(ma_format_f32, 1, (ma_uint32) sample_rate);
            ma_decoder decoder;
            if (ma_decoder_init_memory(buf, len, &config, &decoder) != MA_SUCCESS) {
                return 0;
            }
            ma_uint64 n = 0;
            const ma_result rc = ma_decoder_get_length_in_pcm_frames(&decoder, &n);
            ma_decoder_uninit(&decoder);
            if (rc == MA_SUCCESS) {
                *kind = 2;
                *frames = n;
            }
            return 0;
        }
        if (len > (size_t) INT32_MAX) {
            return 0;  // stb_image takes an int length
        }
        int x = 0, y = 0, comp = 0;
        if (stbi_info_from_memory(buf, (int) len, &x, &y, &comp) != 0) {
            *kind = 1;
            *width = x;
            *height = y;
        }
        return 0;
    } catch (const std::exception & e) {
        report(err, err_size, e.what());
    } catch (...) {
        report(err, err_size, nullptr);
    }
    return -1;
}

// mtmd_init_from_file with upstream's defaults and the settings llama-server passes (its
// server-context.cpp), so a ctypes struct layout never has to track mtmd's. NULL with `err` set
// when an exception escaped; NULL with `err` empty when mtmd refused the file (it logs why).
LLAMACT_SHIM_API mtmd_context * llamact_mtmd_init(const char * path, const struct llama_model * model,
                                                  int32_t use_gpu, int32_t n_threads, int32_t flash_attn_type,
                                                  int32_t warmup, int32_t image_min_tokens,
                                                  int32_t image_max_tokens, const char * media_marker,
                                                  char * err, size_t err_size) {
    LLAMACT_GUARD(err, err_size, nullptr,
        mtmd_context_params params = mtmd_context_params_default();
        params.use_gpu = use_gpu != 0;
        params.print_timings = false;
        params.n_threads = n_threads;
        params.flash_attn_type = (enum llama_flash_attn_type) flash_attn_type;
        params.warmup = warmup != 0;
        params.image_min_tokens = image_min_tokens;
        params.image_max_tokens = image_max_tokens;
        if (media_marker != nullptr && media_marker[0] != '\0') {
            params.media_marker = media_marker;
        }
        return mtmd_init_from_file(path, model, params);)
}

// mtmd_helper_bitmap_init_from_buf: an image or audio file's bytes decoded into a bitmap whose id is
// the SHA-256 of the bytes (llama-server's cache key). NULL when mtmd cannot decode it (it logs why);
// `err` set when an exception escaped.
LLAMACT_SHIM_API mtmd_bitmap * llamact_mtmd_bitmap_from_buf(const mtmd_context * ctx, const unsigned char * buf,
                                                            size_t len, char * err, size_t err_size) {
    LLAMACT_GUARD(err, err_size, nullptr,
        const mtmd_helper_bitmap_wrapper out =
            mtmd_helper_bitmap_init_from_buf(ctx, buf, len, false, mtmd_helper_init_opt_default());
        if (out.video_ctx != nullptr) {  // never with MTMD_VIDEO off; refuse rather than leak a decoder
            mtmd_helper_video_free(out.video_ctx);
            if (out.bitmap != nullptr) {
                mtmd_bitmap_free(out.bitmap);
            }
            report(err, err_size, "video is not supported");
            return nullptr;
        }
        return out.bitmap;)
}

// mtmd_tokenize: `text` (its media markers) and the bitmaps into `chunks`. mtmd's codes: 0, 1 (the
// markers and bitmaps do not pair up), 2 (preprocessing failed); -1 with `err` set.
LLAMACT_SHIM_API int32_t llamact_mtmd_tokenize(const mtmd_context * ctx, mtmd_input_chunks * chunks, const char * text,
                                               size_t text_len, int32_t add_special, int32_t parse_special,
                                               const mtmd_bitmap * const * bitmaps, size_t n_bitmaps, char * err,
                                               size_t err_size) {
    LLAMACT_GUARD(err, err_size, -1,
        mtmd_input_text input = { text, text_len, add_special != 0, parse_special != 0 };
        return mtmd_tokenize(ctx, chunks, &input, bitmaps, n_bitmaps);)
}

// Encode media chunks together, as llama-server does (process_mtmd_chunk): `chunks[0]` first, then
// as many of the following ones as mtmd batches with it (same kind and size, within its token
// budget). *n_added: how many went into `batch`. Returns mtmd_batch_encode's code (0 = encoded),
// or -1 with `err` set. The chunks must outlive the batch (it keeps their addresses).
LLAMACT_SHIM_API int32_t llamact_mtmd_batch_encode(mtmd_batch * batch, const mtmd_input_chunk * const * chunks,
                                                   size_t n_chunks, int32_t * n_added, char * err, size_t err_size) {
    LLAMACT_GUARD(err, err_size, -1,
        *n_added = 0;
        for (size_t i = 0; i < n_chunks; ++i) {
            if (mtmd_batch_add_chunk(batch, chunks[i]) != 0) {
                if (i == 0) {
                    report(err, err_size, "this media chunk cannot be encoded by the projector");
                    return -1;
                }
                break;
            }
            *n_added += 1;
        }
        return mtmd_batch_encode(batch);)
}

// Decode one encoded media chunk's embeddings into sequence `seq_id` from position `n_past`
// (mtmd_helper_decode_image_chunk: M-RoPE positions, non-causal attention where the projector needs
// it, batches of n_batch). Returns 0 with *new_n_past set; 1 when `batch` holds no embeddings for the
// chunk; llama_decode's code when a decode failed (2: aborted through `abort_flag`, consumed);
// -1 with `err` set.
LLAMACT_SHIM_API int32_t llamact_mtmd_decode_chunk(mtmd_context * ctx, struct llama_context * lctx, mtmd_batch * batch,
                                                   const mtmd_input_chunk * chunk, int32_t n_past, int32_t seq_id,
                                                   int32_t n_batch, void * abort_flag, int32_t * new_n_past,
                                                   char * err, size_t err_size) {
    LLAMACT_GUARD(err, err_size, -1,
        if (n_batch <= 0) {
            report(err, err_size, "n_batch must be positive");
            return -1;
        }
        float * embd = mtmd_batch_get_output_embd(batch, chunk);
        if (embd == nullptr) {
            return 1;
        }
        if (llamact_shim::take_abort(abort_flag)) {
            return 2;
        }
        llama_pos out = n_past;
        const int32_t rc = mtmd_helper_decode_image_chunk(ctx, lctx, chunk, embd, n_past, seq_id, n_batch, &out,
                                                          nullptr, nullptr);
        if (rc == -1) {
            report(err, err_size, "mtmd cannot decode this chunk (not an image or audio chunk)");
            return -1;
        }
        if (rc == 2) {
            llamact_shim::take_abort(abort_flag);
        }
        if (rc == 0) {
            *new_n_past = out;
        }
        return rc;)
}
