#include "inputs.h"

#include <kiln/onnx.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace kiln_run {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

[[noreturn]] void fail(const std::string& msg) { throw kiln::Error(msg); }

// The value of `key` in a NumPy header dict: "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }".
std::string header_field(const std::string& header, const std::string& key, const std::string& path) {
    auto k = header.find("'" + key + "'");
    if (k == std::string::npos) fail("read_npy: '" + path + "': the header has no '" + key + "'");
    auto colon = header.find(':', k);
    if (colon == std::string::npos) fail("read_npy: '" + path + "': malformed header");
    std::size_t start = header.find_first_not_of(' ', colon + 1);
    if (start == std::string::npos) fail("read_npy: '" + path + "': malformed header");
    std::size_t end;
    if (header[start] == '(') end = header.find(')', start) + 1;
    else if (header[start] == '\'') end = header.find('\'', start + 1) + 1;
    else end = header.find_first_of(",}", start);
    if (end == std::string::npos || end == 0 || end <= start) fail("read_npy: '" + path + "': malformed header");
    return header.substr(start, end - start);
}

}  // namespace

// .npy dtype codes (little-endian hosts only, as Kiln is).
const std::pair<const char*, kiln::DType> kNpyTypes[] = {
    {"'<f4'", kiln::DType::f32}, {"'<f8'", kiln::DType::f64}, {"'<f2'", kiln::DType::f16},
    {"'|i1'", kiln::DType::i8},  {"'|u1'", kiln::DType::u8},  {"'<i4'", kiln::DType::i32},
    {"'<i8'", kiln::DType::i64}, {"'|b1'", kiln::DType::boolean}};

kiln::Tensor read_npy(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("read_npy: cannot open '" + path + "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    std::string bytes = ss.str();
    if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) fail("read_npy: '" + path + "' is not a .npy file");
    int major = static_cast<unsigned char>(bytes[6]);
    std::size_t header_len, offset;
    if (major == 1) {
        header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
        offset = 10;
    } else if (major == 2 || major == 3) {
        if (bytes.size() < 12) fail("read_npy: '" + path + "' is truncated");
        header_len = 0;
        for (int i = 0; i < 4; ++i) header_len |= static_cast<std::size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
        offset = 12;
    } else {
        fail("read_npy: '" + path + "': format version " + std::to_string(major) + " is not supported");
    }
    if (bytes.size() < offset + header_len) fail("read_npy: '" + path + "' is truncated");
    std::string header = bytes.substr(offset, header_len);
    std::string descr = header_field(header, "descr", path);
    if (header_field(header, "fortran_order", path) != "False") fail("read_npy: '" + path + "': Fortran order is not supported");
    kiln::Shape shape = parse_shape(header_field(header, "shape", path));
    const kiln::DType* dtype = nullptr;
    for (const auto& t : kNpyTypes)
        if (descr == t.first) dtype = &t.second;
    if (dtype == nullptr) fail("read_npy: '" + path + "': dtype " + descr + " is not supported");
    kiln::Tensor t = kiln::Tensor::zeros(shape, *dtype);
    std::size_t n = static_cast<std::size_t>(t.numel()) * kiln::dtype_size(*dtype);
    if (bytes.size() - offset - header_len != n)
        fail("read_npy: '" + path + "': holds " + std::to_string(bytes.size() - offset - header_len) + " data bytes, expected " +
             std::to_string(n));
    if (n > 0) std::memcpy(t.data(), bytes.data() + offset + header_len, n);
    return t;
}

void write_npy(const std::string& path, const kiln::Tensor& t) {
    const char* descr = nullptr;
    for (const auto& [code, dt] : kNpyTypes)
        if (dt == t.dtype()) descr = code;
    if (descr == nullptr) fail("write_npy: '" + path + "': dtype " + std::string(kiln::dtype_name(t.dtype())) + " has no .npy code here");
    std::string shape = "(";
    for (std::int64_t d : t.shape()) shape += std::to_string(d) + ",";
    if (t.shape().size() > 1) shape.pop_back();
    shape += ")";
    std::string header = std::string("{'descr': ") + descr + ", 'fortran_order': False, 'shape': " + shape + ", }";
    // Magic (6) + version (2) + length (2) + header, padded with spaces to a multiple of 64, ending in '\n'.
    header.append(63 - (10 + header.size()) % 64, ' ');
    header += '\n';
    kiln::Tensor c = t.contiguous();
    std::ofstream out(path, std::ios::binary);
    if (!out) fail("write_npy: cannot create '" + path + "'");
    const auto len = static_cast<std::uint16_t>(header.size());
    const char prefix[10] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
    out.write(prefix, sizeof prefix);
    out << header;
    out.write(static_cast<const char*>(c.data()), static_cast<std::streamsize>(static_cast<std::size_t>(c.numel()) * kiln::dtype_size(c.dtype())));
    if (!out) fail("write_npy: writing '" + path + "' failed");
}

kiln::Shape parse_shape(const std::string& text) {
    kiln::Shape s;
    std::string cur;
    bool any_digit = false;
    auto flush = [&] {
        if (cur.empty()) return;
        s.push_back(std::stoll(cur));
        cur.clear();
    };
    if (text == "scalar") return s;
    for (char ch : text) {
        if (ch >= '0' && ch <= '9') {
            cur += ch;
            any_digit = true;
        } else if (ch == 'x' || ch == ',' || ch == ' ') {
            flush();
        } else if (ch != '(' && ch != ')' && ch != '[' && ch != ']') {
            fail("bad shape '" + text + "': expected dims like 2x3x224 or 2,3,224");
        }
    }
    flush();
    if (!any_digit && !text.empty() && text != "()" && text != "[]")
        fail("bad shape '" + text + "'");
    return s;
}

kiln::Tensor tensor_from_spec(const std::string& spec, kiln::DType dtype, std::uint64_t seed) {
    if (ends_with(spec, ".pb")) return kiln::load_onnx_tensor(spec);
    if (ends_with(spec, ".npy")) return read_npy(spec);
    kiln::Shape shape = parse_shape(spec);
    if (kiln::is_floating(dtype)) return kiln::Tensor::randn(shape, seed, dtype);
    if (dtype == kiln::DType::boolean) return kiln::Tensor::rand(shape, seed, kiln::DType::i32, 0, 2).astype(dtype);
    return kiln::Tensor::rand(shape, seed, dtype, 0, 10);
}

}  // namespace kiln_run
