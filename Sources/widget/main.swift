import Foundation
import StoreCLI

exit(Targets.widget.run(CommandLine.arguments))
