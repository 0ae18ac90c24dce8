#include "impls/plugin_loader.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <filesystem>

namespace ropecheck {

KernelErrorModel loaded_kernel_error_model(AngleModel model) {
  if (model == AngleModel::fp32) return {2.0, 0.0, false};
  return {2.0, 0x1p-52, true};
}

PluginLoad load_kernel_plugin(const std::string& path, AngleModel model) {
  PluginLoad r;
  struct stat st {};
  if (path.empty()) {
    r.error = "no kernel library given";
    return r;
  }
  if (::stat(path.c_str(), &st) != 0) {
    r.error = "cannot load kernel '" + path + "': no such file";
    return r;
  }
  if (!S_ISREG(st.st_mode)) {
    r.error = "cannot load kernel '" + path + "': not a regular file";
    return r;
  }
  // dlopen searches the library path for names without a slash: make it a path.
  std::string p = path.find('/') == std::string::npos ? "./" + path : path;
  dlerror();
  void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    r.error = "cannot load kernel '" + path + "': " + (e ? e : "dlopen failed");
    return r;
  }
  dlerror();
  void* sym = dlsym(h, "rc_rope_apply");
  const char* e = dlerror();
  if (e || !sym) {
    r.error = "kernel '" + path + "' does not export rc_rope_apply" + (e ? std::string(": ") + e : std::string()) +
              " (declare it extern \"C\" and visible; see include/ropecheck/kernel_abi.h)";
    dlclose(h);
    return r;
  }
  Implementation impl;
  impl.name = std::filesystem::path(path).stem().string();
  impl.description = "loaded from " + path;
  static_assert(sizeof(void*) == sizeof(rc_rope_apply_fn));
  rc_rope_apply_fn fn;
  std::memcpy(&fn, &sym, sizeof fn);
  impl.fn = fn;
  impl.dtypes.assign(std::begin(kAllDtypes), std::end(kAllDtypes));
  impl.layouts.assign(std::begin(kAllLayouts), std::end(kAllLayouts));
  impl.angle_model = model;
  impl.error_model = loaded_kernel_error_model(model);
  impl.bit_exact_layouts = false;
  r.impl = std::move(impl);
  return r;
}

}  // namespace ropecheck
