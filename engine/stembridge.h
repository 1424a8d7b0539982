/* Stembridge's engine, as its front ends (the CLI, the plugin, the converter) see it: the one
 * header they include, as lilv.h is for lilv. Everything behind it (the backends and their
 * operations, the models' layers, the scheduler) may change without a front end noticing.
 *
 *   devices       backend/device.h   the device table: enumerate, "auto", ids and stable keys,
 *                                    "device:N" / "NAME:N" requests, each device's details
 *   jobs          jobs/engine.h      the engine: workers per device set, submit, progress,
 *                                    cancel, results as data (status, manifest, devices, the
 *                                    stems' paths and the model that made them)
 *   models        models/model.h     opening a model by name or file, what it makes, `auto`
 *                 models/catalog.h   the catalogue: names, files, sizes, published SDR
 *                 models/install.h   downloads, checks and installs
 *   files         io/stream.h        sources and sinks of audio
 *                 io/audio_file.h    reading and writing audio files
 *                 io/stem_writer.h   stems written all or nothing, names from templates
 *                 io/manifest.h      the manifest: its fields, read back (batch restarts)
 *                 io/temp_file.h     temporary names, renamed into place
 *                 io/wav_writer.h    float WAV written as it comes (the plugin's takes)
 *   conversion    convert/convert.h  checkpoints to safetensors (stembridge-convert)
 *
 * tests/core/test_layers.sh holds the front ends to this header and the engine's folders to
 * their order (core <- io <- backend <- models <- jobs).
 */
#ifndef STEMBRIDGE_H
#define STEMBRIDGE_H

#include "sb_common.h"

#include "backend/device.h"
#include "convert/convert.h"
#include "io/audio_file.h"
#include "io/manifest.h"
#include "io/stem_writer.h"
#include "io/stream.h"
#include "io/temp_file.h"
#include "io/wav_writer.h"
#include "jobs/engine.h"
#include "models/catalog.h"
#include "models/install.h"
#include "models/model.h"

#endif
