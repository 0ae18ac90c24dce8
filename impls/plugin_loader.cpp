#include "impls/plugin_loader.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>

namespace ropecheck {

std::string check_kernel_path(const std::string& path) {
  struct stat st {};
  if (path.empty()) return "no kernel library given";
  if (::stat(path.c_str(), &st) != 0) return "cannot load kernel '" + path + "': no such file";
  if (!S_ISREG(st.st_mode)) return "cannot load kernel '" + path + "': not a regular file";
  return "";
}

OpenedKernel open_kernel_library(const std::string& path) {
  OpenedKernel r;
  if (std::string e = check_kernel_path(path); !e.empty()) {
    r.error = e;
    return r;
  }
  // dlopen searches the library path for names without a slash: make it a path.
  const std::string p = path.find('/') == std::string::npos ? "./" + path : path;
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
  static_assert(sizeof(void*) == sizeof(rc_rope_apply_fn));
  std::memcpy(&r.fn, &sym, sizeof r.fn);
  return r;
}

PluginLoad plugin_implementation(const std::string& path) {
  PluginLoad r;
  if (std::string e = check_kernel_path(path); !e.empty()) {
    r.error = e;
    return r;
  }
  Implementation impl;
  impl.name = std::filesystem::path(path).stem().string();
  impl.description = "loaded from " + path;
  impl.library = path;
  impl.dtypes.assign(std::begin(kAllDtypes), std::end(kAllDtypes));
  impl.layouts.assign(std::begin(kAllLayouts), std::end(kAllLayouts));
  impl.bit_exact_layouts = false;
  impl.bit_exact_shapes = false;
  r.impl = std::move(impl);
  return r;
}

Implementation served_implementation(int host_fd, const std::string& name) {
  Implementation impl;
  impl.name = name.empty() ? "served" : name;
  impl.description = "calls served by the process at the other end of fd " + std::to_string(host_fd);
  impl.host_fd = host_fd;
  impl.dtypes.assign(std::begin(kAllDtypes), std::end(kAllDtypes));
  impl.layouts.assign(std::begin(kAllLayouts), std::end(kAllLayouts));
  impl.bit_exact_layouts = false;
  impl.bit_exact_shapes = false;
  return impl;
}

PluginLoad load_kernel_plugin(const std::string& path) {
  PluginLoad r = plugin_implementation(path);
  if (!r.impl) return r;
  const OpenedKernel k = open_kernel_library(path);
  if (!k.fn) return {std::nullopt, k.error};
  r.impl->fn = k.fn;
  return r;
}

}  // namespace ropecheck
