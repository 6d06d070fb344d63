import Foundation
import StoreCLI
import StoreCLIMirror

exit(Targets.storectlWithMirror.run(CommandLine.arguments))
