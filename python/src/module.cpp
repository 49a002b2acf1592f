// tokensieve._tokensieve: the engine in-process. Engine errors (ts::Error, bad command-style
// options) become tokensieve.Error, a ValueError carrying the engine's one-line message.
#include <CLI/CLI.hpp>

#include "bindings.h"
#include "core/error.h"

NB_MODULE(_tokensieve, m) {
  m.doc() = "tokensieve engine bindings (use the tokensieve package, not this module)";
  static nanobind::exception<ts::Error> error(m, "Error", PyExc_ValueError);
  nanobind::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const CLI::Error& e) {  // a request's option combination, as the CLI's usage errors
      PyErr_SetString(error.ptr(), e.what());
    }
  });
  ts::python::add_model(m);
  ts::python::add_session(m);
  ts::python::add_policies(m);
  ts::python::add_sweep(m);
}
