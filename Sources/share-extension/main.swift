import Foundation
import StoreCLI

exit(Targets.shareExtension.run(CommandLine.arguments))
