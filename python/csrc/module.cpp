// torch_terse._C: the process group class and the function torch.distributed's backend
// registry calls (torch_terse/__init__.py registers it under the name "terse").
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group_terse.h"

namespace py = pybind11;
using torch_terse::ProcessGroupTerse;

PYBIND11_MODULE(_C, m) {
  // The base class's Python type lives in torch.distributed's own module.
  py::module::import("torch.distributed");
  py::class_<ProcessGroupTerse, TORCH_TERSE_BASE, c10::intrusive_ptr<ProcessGroupTerse>>(
      m, "ProcessGroupTerse")
      .def("allreduce_named", &ProcessGroupTerse::allreduce_named, py::arg("tensor"),
           py::arg("name"), py::arg("codec") = "", py::arg("average") = false,
           py::call_guard<py::gil_scoped_release>())
      .def("stats",
           [](ProcessGroupTerse& group) {
             terseStats stats;
             {
               py::gil_scoped_release released;
               stats = group.stats();
             }
             py::dict out;
             out["calls"] = stats.calls;
             out["compressed_calls"] = stats.compressed_calls;
             out["raw_bytes"] = stats.raw_bytes;
             out["wire_bytes"] = stats.wire_bytes;
             out["dense_wire_bytes"] = stats.dense_wire_bytes;
             out["encode_seconds"] = stats.encode_seconds;
             out["decode_seconds"] = stats.decode_seconds;
             out["seconds"] = stats.seconds;
             out["residual_entries"] = stats.residual_entries;
             out["residual_bytes"] = stats.residual_bytes;
             out["residual_admitted"] = stats.residual_admitted;
             out["last_codec"] = std::string(stats.last_codec);
             out["last_algorithm"] = std::string(stats.last_algorithm);
             return out;
           })
      .def("set_codec", &ProcessGroupTerse::set_codec, py::arg("codec"),
           py::call_guard<py::gil_scoped_release>())
      .def("reset_residual", &ProcessGroupTerse::reset_residual, py::arg("name") = "",
           py::call_guard<py::gil_scoped_release>());
  m.def(
      "create",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout) {
        return c10::static_intrusive_pointer_cast<ProcessGroupTerse>(
            ProcessGroupTerse::create(store, rank, size, timeout));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::call_guard<py::gil_scoped_release>());
}
