import Foundation

// MARK: - Completion and manual pages, from the same definitions the parser parses with

extension CommandLineParser {
    /// A bash completion function for the tool: its commands as the first word, then each
    /// command's flags and the common ones; a flag's value completes as a file or directory name
    /// when its name says it is one (`FILE`, `DIR`), else as nothing. Sourced, with others, from
    /// `storectl completions bash`.
    public func bashCompletion(positionalWords: [String: [String]] = [:]) -> String {
        let function = "_sharedstore_" + tool.map { $0.isLetter || $0.isNumber ? $0 : "_" }.map(String.init).joined()
        let single = commands.count == 1 && commands.first?.name.isEmpty == true
        var lines = [
            "\(function)() {", "    local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"",
        ]
        let options = commands.flatMap(\.options) + common
        let dirs = Set(options.filter { $0.valueName == "DIR" }.map { "--" + $0.name })
        let files = Set(options.filter { Self.takesPath($0) && $0.valueName != "DIR" }.map { "--" + $0.name })
        let values = Set(options.filter { $0.valueName != nil }.map { "--" + $0.name })
        lines += equalsForm(dirs: dirs, files: files)
        lines.append("    case \"$prev\" in")
        if !dirs.isEmpty {
            lines.append(
                "        \(dirs.sorted().joined(separator: "|"))) COMPREPLY=($(compgen -d -- \"$cur\")); return ;;")
        }
        if !files.isEmpty {
            lines.append(
                "        \(files.sorted().joined(separator: "|"))) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;")
        }
        let others = values.subtracting(files).subtracting(dirs)
        if !others.isEmpty {
            lines.append("        \(others.sorted().joined(separator: "|"))) COMPREPLY=(); return ;;")
        }
        lines.append("    esac")
        let commonFlags = common.map { "--" + $0.name }.joined(separator: " ")
        if single, let only = commands.first {
            lines.append("    " + completion(of: only, commonFlags: commonFlags, positionalWords: positionalWords))
        } else {
            let names = commands.map(\.name).filter { !$0.isEmpty }
            lines.append("    if [ \"$COMP_CWORD\" -eq 1 ]; then")
            lines.append("        COMPREPLY=($(compgen -W \"\(names.joined(separator: " "))\" -- \"$cur\")); return")
            lines.append("    fi")
            lines.append("    case \"${COMP_WORDS[1]}\" in")
            for c in commands where !c.name.isEmpty {
                let words = completion(of: c, commonFlags: commonFlags, positionalWords: positionalWords)
                lines.append("        \(c.name)) \(words) ;;")
            }
            lines.append("        *) COMPREPLY=() ;;")
            lines.append("    esac")
        }
        lines.append("}")
        lines.append("complete -F \(function) \(tool)")
        return lines.joined(separator: "\n") + "\n"
    }

    /// `--option=value` completes its value as `--option value` does.
    private func equalsForm(dirs: Set<String>, files: Set<String>) -> [String] {
        var lines: [String] = []
        lines.append("    if [[ \"$cur\" == --*=* ]]; then")
        lines.append("        local opt=\"${cur%%=*}\" val=\"${cur#*=}\"")
        lines.append("        case \"$opt\" in")
        if !dirs.isEmpty {
            lines.append(
                "            \(dirs.sorted().joined(separator: "|"))) "
                    + "COMPREPLY=($(compgen -d -P \"$opt=\" -- \"$val\")) ;;")
        }
        if !files.isEmpty {
            lines.append(
                "            \(files.sorted().joined(separator: "|"))) "
                    + "COMPREPLY=($(compgen -f -P \"$opt=\" -- \"$val\")) ;;")
        }
        lines.append("            *) COMPREPLY=() ;;")
        lines.append("        esac")
        lines.append("        return")
        lines.append("    fi")
        return lines
    }

    /// The completion of one command's words: its flags, and its positional (a file, a
    /// directory, or the words it takes).
    private func completion(of c: Command, commonFlags: String, positionalWords: [String: [String]]) -> String {
        let flags = (c.options.map { "--" + $0.name } + [commonFlags]).joined(separator: " ")
        // A word not starting with "-" is a positional: a file, or the words it takes.
        guard let positional = c.positionals.first else {
            return "COMPREPLY=($(compgen -W \"\(flags)\" -- \"$cur\"))"
        }
        let words: String
        if ["FILE", "PATH"].contains(positional) {
            words = "$(compgen -f -- \"$cur\")"
        } else if positional == "DIR" {
            words = "$(compgen -d -- \"$cur\")"
        } else {
            words = "$(compgen -W \"\((positionalWords[positional] ?? []).joined(separator: " "))\" -- \"$cur\")"
        }
        return "if [[ \"$cur\" == -* ]]; then COMPREPLY=($(compgen -W \"\(flags)\" -- \"$cur\")); "
            + "else COMPREPLY=(\(words)); fi"
    }

    /// The tool's manual page, section 1, in the `man` macros of groff: name, synopsis,
    /// description, each command with its flags, the common flags and the exit status.
    public func manPage(date: String, source: String = "SharedStore") -> String {
        var out = [
            ".TH \(Self.roff(tool.uppercased())) 1 \"\(date)\" \"\(source)\" \"User Commands\"",
            ".SH NAME", "\(Self.roff(tool)) \\- \(Self.roff(summary))", ".SH SYNOPSIS",
        ]
        for c in commands {
            out.append(".B \(Self.roff(tool))")
            if !c.usageLine.isEmpty { out.append(Self.roff(c.usageLine)) }
            out.append(".br")
        }
        out += [".SH DESCRIPTION", Self.roff(summary) + "."]
        let named = commands.filter { !$0.name.isEmpty }
        if !named.isEmpty {
            out.append(".SH COMMANDS")
            for c in named {
                out += [".TP", ".B \(Self.roff(c.usageLine))", Self.roff(c.summary)]
                for o in c.options { out += [".RS", ".TP", ".B \(Self.roff(o.display))", Self.roff(o.help), ".RE"] }
            }
        } else if let only = commands.first, !only.options.isEmpty {
            out.append(".SH OPTIONS")
            for o in only.options { out += [".TP", ".B \(Self.roff(o.display))", Self.roff(o.help)] }
        }
        out.append(".SH COMMON OPTIONS")
        for o in common { out += [".TP", ".B \(Self.roff(o.display))", Self.roff(o.help)] }
        out += [
            ".SH EXIT STATUS", ".TP", ".B 0", "success.", ".TP", ".B 1",
            "the operation failed; one line starting with error: on standard error names the problem.", ".TP", ".B 2",
            "a usage error, naming the argument.",
        ]
        return out.joined(separator: "\n") + "\n"
    }

    /// Whether the value of `option` names a file or a directory.
    static func takesPath(_ option: Option) -> Bool {
        ["FILE", "DIR", "PATH"].contains(option.valueName ?? "")
    }

    /// `text` safe as a line of roff: backslashes doubled, a leading dot or quote escaped, dashes
    /// as the minus sign a man page prints.
    static func roff(_ text: String) -> String {
        var s = text.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(of: "-", with: "\\-")
        if s.hasPrefix(".") || s.hasPrefix("'") { s = "\\&" + s }
        return s
    }
}
